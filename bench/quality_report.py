"""The report of ``vsparta bench quality``: tables and plot from runs, merged across runs.

``docs/quality.md`` leads with the test pool's rows at every top-n cut; then every pool at the
same size side by side (test, shift, held-out words, held-out objects) with the ambiguity ceiling
of each (``scenes.object_ceiling``) and each model's shift R@1 as a share of its test R@1; then the
learning-rate sweeps. ``quality.png`` plots R@1 against terms per image.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from vsparta.bench.written import write_report


def merge_runs(paths: list[Path]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Several runs (say one per model, trained side by side) as one table; each keeps its settings."""
    results: list[dict[str, Any]] = []
    metas = []
    for path in paths:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        metas.append(data["meta"])
        s = data["meta"]["settings"]
        init = "from scratch" if str(s["init"]).lower() == "none" else f"from {str(s['init']).split('/')[-1]}"
        for res in data["results"]:
            label = (
                f"{res['variant']}, {_config_name(s['config'])}, {init}{_recipe_notes(s['config'])}, "
                f"{s['size']} px scenes{_views(s)}, <= {s['epochs']} ep"
            )
            results.append(res | {"variant": label, "settings": s, "command": data["meta"]["command"]})
    meta = metas[0] | {
        "command": " ; ".join(m["command"] for m in metas),
        "seconds": round(max(m["seconds"] for m in metas), 1),
        "runs": metas,
    }
    return results, meta


# config keys that change a recipe without changing its variant name, as the merged table says them
_NOTES = {
    ("freeze_word_embeddings", True): "frozen word embeddings",
    ("pooling", "mean"): "mean pooling",
    ("similarity", "cosine"): "cosine",
}


def _config_name(config: str) -> str:
    """A preset's name (also for a JSON ``--config``, inline or a file, that has exactly a preset's
    values), or what the JSON sets of the stem and the transformer's depth."""
    from vsparta.model.configuration import PRESETS

    try:
        text = Path(config).read_text(encoding="utf-8") if config.endswith(".json") else config
        values = json.loads(text)
    except (TypeError, ValueError, OSError):
        return config
    same = [name for name, preset in PRESETS.items() if preset == values]
    if same:
        return same[0]
    name = f"{values.get('stem', 'patch')} stem"
    name += f" at {values['image_size']} px" if "image_size" in values else ""
    return name + (f", {values['num_hidden_layers']} layers" if "num_hidden_layers" in values else "")


def _views(s: dict[str, Any]) -> str:
    """ ", 2 views" for a run that trained on augmented views (runs from before say nothing), with
    the zoom range when it is not the default, and the training look when it is not the seen one."""
    views = s.get("augment_views") or 1
    scale = s.get("augment_scale")  # runs from before, or of the default range (0.7-1.3), say nothing
    zoom = f" zoomed {scale[0]:g}-{scale[1]:g}x" if scale and list(scale) != [0.7, 1.3] else ""
    look = s.get("train_look") or "seen"  # runs from before trained on the seen look
    return (f", {views} views{zoom}" if views > 1 else "") + ("" if look == "seen" else f", {look} look")


def _recipe_notes(config: str) -> str:
    """ ", frozen word embeddings" and the like for a JSON ``--config``; "" for a preset name."""
    try:
        values = json.loads(config)
    except (TypeError, ValueError):
        return ""
    notes = [
        text for (key, value), text in _NOTES.items() if isinstance(values, dict) and values.get(key) == value
    ]
    return "".join(f", {n}" for n in notes)


def write(results: list[dict[str, Any]], meta: dict[str, Any], args: argparse.Namespace) -> int:
    text = markdown(results, meta)
    print(text)  # noqa: T201 - the command's output
    if not args.no_write:
        write_report(args.out_dir, "quality", text, {"meta": meta, "results": results})
        plot(results, meta, args.out_dir / "quality.png")
    return 0


def _r1(row: dict[str, Any], pool: str) -> float:
    return float(row["recall"][pool]["R@1"])


def _data_line(s: dict[str, Any]) -> str:
    groups = f" of groups {', '.join(s['groups'])}" if s.get("groups") else ""
    return (
        f"{s.get('kind', 'shapes')} scenes{groups}, {s['train']} train / {s['val']} val / {s['test']} test, "
        f"{s['size']} px; "
        f"config `{s['config']}`, init `{s['init']}`, up to {s['epochs']} epochs, batch {s['batch_size']}"
    )


def _seconds(res: dict[str, Any]) -> str:
    """A run's training time, "-" for a model trained before whose log did not keep it."""
    return "-" if res.get("seconds") is None else f"{res['seconds']:.0f}"


def _fmt(row: dict[str, Any], key: str, spec: str) -> str:
    return format(row[key], spec) if key in row else "-"


def markdown(results: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    pool = meta["pool"]
    runs = meta.get("runs", [meta])
    lines = [
        "# Retrieval quality vs index size",
        "",
        f"Command: `{meta['command']}`  ",
        f"Machine: {meta['hardware']['cpu']}, {meta['hardware']['cores']} cores (shared); device "
        f"{meta['device']}; total {meta['seconds']:.0f} s.  ",
        *[f"Data: {_data_line(m['settings'])}.  " for m in runs],
        "Each model's learning rate picked by validation R@1+R@5+R@10 (best epoch kept).",
        "",
        *(lead_table(results, pool) if any(res.get("heldout") for res in results) else []),
        f"Recall in % on the {pool}-image test pool; terms/img = mean terms kept per image; postings/q = "
        "postings an inverted index over these images reads per query; "
        "natural = the positive terms capped like `vsparta index` (1000).",
        "",
        "| model | lr | best epoch | train s | top-n | terms/img | postings/q | R@1 | R@5 | R@10 | NDCG@25 |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for res in results:
        for row in res["rows"]:
            rec = row["recall"][pool]
            lines.append(
                f"| {res['variant']} | {res['lr']:g} | {res['best_epoch']} | {_seconds(res)} | "
                f"{row['top_n']} | {_fmt(row, 'terms_per_image', '.0f')} | "
                f"{_fmt(row, 'postings_per_query', '.0f')} | "
                f"{rec['R@1']:.1f} | {rec['R@5']:.1f} | {rec['R@10']:.1f} | {row['ndcg@25']:.3f} |"
            )
    if any(res.get("heldout") for res in results):
        lines += ["", *pools_table(results, pool)]
    lines += ["", "Learning-rate sweeps (validation R@1 at the best epoch):", ""]
    for res in results:
        sweep = ", ".join(f"{r['lr']:g}: {r['val'].get('R@1', float('nan')):.1f}" for r in res["sweep"])
        lines.append(f"- {res['variant']}: {sweep}")
    return "\n".join(lines) + "\n"


POOLS = ("test", "shift", "heldout_words", "heldout_objects")


def _test_row(res: dict[str, Any]) -> dict[str, Any]:
    """The test pool's row a model is searched with: natural sparsity (the dense model's only row)."""
    return next((r for r in res["rows"] if r["top_n"] == "natural"), res["rows"][0])


def lead_table(results: list[dict[str, Any]], pool: str) -> list[str]:
    """One line per model: its cost and R@1 on every pool (natural sparsity), before the details."""
    lines = [
        f"R@1 in % on each {pool}-image pool (natural sparsity; the shift split's share of test R@1 in "
        "brackets); train s = wall time of the chosen run.",
        "",
        "| model | lr | best epoch | train s | terms/img | test | shift | held-out words "
        "| held-out objects |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for res in results:
        rows = {"test": _test_row(res), **res.get("heldout", {})}
        r1 = {k: float(next(iter(row["recall"].values()))["R@1"]) for k, row in rows.items()}
        r1["test"] = float(rows["test"]["recall"][pool]["R@1"])
        shift = f"{r1['shift']:.1f} ({r1['shift'] / r1['test']:.2f})" if "shift" in r1 and r1["test"] else "-"
        cells = [f"{r1[k]:.1f}" if k in r1 else "-" for k in ("heldout_words", "heldout_objects")]
        lines.append(
            f"| {res['variant']} | {res['lr']:g} | {res['best_epoch']} | {_seconds(res)} | "
            f"{_fmt(rows['test'], 'terms_per_image', '.0f')} | {r1['test']:.1f} | {shift} | "
            f"{' | '.join(cells)} |"
        )
    return [*lines, ""]


def pools_table(results: list[dict[str, Any]], pool: str) -> list[str]:
    """Every pool side by side at natural sparsity, with its ambiguity ceiling and, for the shift
    split, R@1 as a share of the same model's test R@1."""
    lines = [
        "Every pool (natural sparsity; each its own images): *shift* = the test objects and words drawn "
        "and captioned in a style no training scene has (other sizes and angles, shadows, gradient or "
        "noise backgrounds, other caption templates); *held-out words* = seen objects named by an alias "
        "or category word no training caption uses; *held-out objects* = an object no training image "
        "shows. Ceiling: R@1 of a perfect object detector (images showing exactly the caption's objects "
        "first, `scenes/object_ceiling.py`).",
        "",
        "| model | pool | images | R@1 | R@5 | R@10 | NDCG@25 | terms/img | ceiling R@1 | R@1 / test R@1 |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for res in results:
        rows = {"test": _test_row(res), **res.get("heldout", {})}
        test_r1 = float(rows["test"]["recall"][pool]["R@1"])
        for name in [p for p in POOLS if p in rows]:
            row = rows[name]
            images = pool if name == "test" else next(iter(row["recall"]))
            rec = row["recall"][images]
            ceiling = res.get("ceilings", {}).get(name)
            share = f"{rec['R@1'] / test_r1:.2f}" if name != "test" and test_r1 else "-"
            lines.append(
                f"| {res['variant']} | {name} | {images} | {rec['R@1']:.1f} | {rec['R@5']:.1f} | "
                f"{rec['R@10']:.1f} | {row['ndcg@25']:.3f} | {_fmt(row, 'terms_per_image', '.0f')} | "
                f"{'-' if ceiling is None else f'{ceiling:.1f}'} | {share} |"
            )
    return lines


def plot(results: list[dict[str, Any]], meta: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pool = meta["pool"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for res in results:
        rows = [r for r in res["rows"] if "terms_per_image" in r]
        if rows:
            pts = sorted({(max(r["terms_per_image"], 1e-3), _r1(r, pool)) for r in rows})
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=res["variant"])
            nat = [r for r in rows if r["top_n"] == "natural"]
            if nat:
                ax.annotate("natural", (nat[0]["terms_per_image"], _r1(nat[0], pool)), fontsize=8)
        elif res["rows"]:
            ax.axhline(_r1(res["rows"][0], pool), linestyle="--", color="gray", label=res["variant"])
    ax.set_xscale("log")
    ax.set_xlabel("terms per image (log)")
    ax.set_ylabel(f"R@1 (%), {pool} test images")
    ax.set_title("R@1 vs index size (top-n cut of φ)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
