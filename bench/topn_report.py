"""The top-n trade-off (paper Table 3 / Figure 1) as ``docs/topn.md`` and ``docs/topn.png``.

Two measurements joined by n, because each needs its own data: recall needs a trained model and
captions (``vsparta eval --json`` on the generated image benchmark), and latency needs an index
big enough for the number of terms per image to matter (``vsparta bench topn``, synthetic images
truncated to their n heaviest terms). The table says which column comes from where.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from vsparta.bench.hardware import one_line

PLOTTED_ENGINE = "ours: embedded"


def _key(top_n: Any) -> str:
    return "all" if top_n in (None, "all") else str(int(top_n))


def recall_rows(eval_json: dict) -> dict[str, dict]:
    """VisualSparta rows of an eval report by top-n ('all' for no cut), with the largest image set's
    recall (the paper reports 1K/5K folds; the generated test split may be smaller)."""
    out = {}
    for row in eval_json["rows"]:
        if row.get("model") != "VisualSparta":
            continue
        folds = row["recall"]
        fold = max(folds, key=lambda f: int(f) if f.isdigit() else 0)
        out[_key(row["top_n"])] = {
            "fold": fold,
            **folds[fold],
            "ndcg@25": row.get("ndcg@25"),
            "terms_per_image": row.get("terms_per_image"),
            "eval_ms": row.get("ms_per_query"),
        }
    return out


def _order(key: str) -> float:
    return float("inf") if key == "all" else float(key)


def joined(latency_rows: list[dict], eval_json: dict | None) -> list[dict]:
    """One row per n: recall (if an eval report is given) + each engine's latency at that n."""
    recalls = recall_rows(eval_json) if eval_json else {}
    by_n: dict[str, dict] = {}
    for r in latency_rows:
        row = by_n.setdefault(_key(r["top_n"]), {"top_n": _key(r["top_n"]), "engines": {}})
        row["engines"][r["engine"]] = r
    for key, rec in recalls.items():
        by_n.setdefault(key, {"top_n": key, "engines": {}})["recall"] = rec
    every = recalls.get("all")
    for key, row in by_n.items():  # n at or above what the model keeps at all: the same as "all"
        if "recall" not in row and every and key != "all" and int(key) >= (every["terms_per_image"] or 0):
            row["recall"] = every | {"same_as_all": True}
    return [by_n[k] for k in sorted(by_n, key=_order)]


def write_markdown(rows: list[dict], meta: dict, path: Path) -> None:
    engines = list(dict.fromkeys(e for r in rows for e in r["engines"]))
    head = ["top-n", "terms/image (model)", "R@1", "R@5", "R@10", "NDCG@25"]
    for e in engines:
        head += [f"{e} p50 ms", f"{e} top-10 vs full", f"{e} B/term"]
    lines = [
        "# Top-n trade-off (paper Table 3 / Figure 1)",
        "",
        f"Command: `{meta['command']}`",
        "",
        f"Hardware: {one_line(meta['hardware'])}.",
        "",
        f"- Recall: {meta['recall_source']}",
        f"- Latency: {meta['latency_source']}",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for r in rows:
        rec = r.get("recall") or {}
        cells = [
            r["top_n"] + (" (= all)" if rec.get("same_as_all") else ""),
            _num(rec.get("terms_per_image"), "{:.1f}"),
            _num(rec.get("R@1"), "{:.1f}"),
            _num(rec.get("R@5"), "{:.1f}"),
            _num(rec.get("R@10"), "{:.1f}"),
            _num(rec.get("ndcg@25"), "{:.3f}"),
        ]
        for e in engines:
            er = r["engines"].get(e, {})
            cells += [
                _num(er.get("p50_ms"), "{:.3f}"),
                _num(er.get("agreement"), "{:.3f}"),
                _num(er.get("bytes_per_term"), "{:.2f}"),
            ]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", *[f"- {n}" for n in meta.get("notes", [])], ""]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines), encoding="utf-8")


def _num(value: Any, fmt: str) -> str:
    return "–" if value is None else fmt.format(value)


def write_plot(rows: list[dict], meta: dict, path: Path) -> None:
    """Recall@1 and @10 against the embedded engine's p50 latency, one point per n (Figure 1)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = [
        (r["engines"][PLOTTED_ENGINE]["p50_ms"], r["recall"], r["top_n"])
        for r in rows
        if r.get("recall") and r["engines"].get(PLOTTED_ENGINE, {}).get("p50_ms")
    ]
    fig, ax = plt.subplots(figsize=(7.5, 5), dpi=110)
    for metric, marker in (("R@1", "o"), ("R@10", "s")):
        xs = [p[0] for p in pts]
        ys = [p[1][metric] for p in pts]
        ax.plot(xs, ys, marker=marker, label=metric)
        for x, y, (_, _, n) in zip(xs, ys, pts, strict=True):
            ax.annotate(f"n={n}", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
    ax.set_xscale("log")
    ax.set_xlabel(f"{PLOTTED_ENGINE}: p50 latency, ms ({meta['latency_size']} images, 1 thread)")
    ax.set_ylabel("recall, % (generated image benchmark)")
    ax.set_title(f"Top-n terms per image: recall vs latency\n{one_line(meta['hardware'])}", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


def load_eval(path: Path | None) -> dict | None:
    return json.loads(path.read_text(encoding="utf-8")) if path else None
