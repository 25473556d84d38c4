"""Turn the runner's rows into a printed table, ``docs/benchmarks.md``, a log-log PNG and raw JSON."""

from __future__ import annotations

import json
import math
from pathlib import Path

from vsparta.bench.hardware import one_line
from vsparta.bench.paper import PAPER_HARDWARE, PAPER_QPS, paper_qps

BASELINE = "scipy (exhaustive)"
COLUMNS = [
    ("engine", "engine"),
    ("kind", "kind"),
    ("size", "images"),
    ("qps_1", "q/s 1 thread"),
    ("x_scipy", "x scipy"),
    ("qps_all", "q/s all cores"),
    ("p50_ms", "p50 ms"),
    ("p99_ms", "p99 ms"),
    ("agreement", "top-10 agree"),
    ("build_s", "build s"),
    ("load_docs_per_s", "load docs/s"),
    ("segments", "segments"),
    ("bytes_per_image", "B/image"),
    ("bytes_per_term", "B/term"),
    ("peak_mem_bytes", "peak MiB"),
]
# Shown only when some row has them (server engines): tables of in-process engines stay narrow.
OPTIONAL = {"load_docs_per_s", "segments"}


def _fmt(key: str, value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if key in {"qps_1", "qps_all", "load_docs_per_s"}:
        return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"
    if key in {"p50_ms", "p99_ms", "build_s"}:
        return f"{value:.3g}" if value < 100 else f"{value:,.0f}"
    if key == "x_scipy":
        return f"{value:.2f}x" if value >= 0.1 else f"{value:.2g}x"
    if key == "agreement":
        return f"{value:.3f}"
    if key in {"bytes_per_image"}:
        return f"{value:,.0f}"
    if key == "bytes_per_term":
        return f"{value:.2f}"
    if key == "peak_mem_bytes":
        return f"{value / 2**20:,.0f}"
    return str(value)


def with_ratios(rows: list[dict]) -> list[dict]:
    """Add ``x_scipy`` (single-thread q/s over scipy's at the same size, same run)."""
    base = {r["n_docs"]: r.get("qps_1") for r in rows if r["engine"] == BASELINE and r.get("qps_1")}
    out = []
    for r in rows:
        r = dict(r)
        if r.get("qps_1") and base.get(r["n_docs"]):
            r["x_scipy"] = r["qps_1"] / base[r["n_docs"]]
        out.append(r)
    return out


def paper_rows(rows: list[dict]) -> list[dict]:
    """The paper's figures at the sizes this run measured (none where the paper has none)."""
    sizes = sorted({(r["n_docs"], r.get("size", str(r["n_docs"]))) for r in rows})
    out = []
    for series in PAPER_QPS:
        for n, label in sizes:
            q = paper_qps(series, n)
            if q is not None:
                out.append(
                    {"engine": series, "kind": "10-core CPU", "n_docs": n, "size": label, "qps_all": q}
                )
    return out


def skip_notes(rows: list[dict]) -> list[str]:
    """One line per skipped (engine, size): the reason, printed under the table."""
    return [
        f"[{i}] {r['engine']} at {r.get('size', r['n_docs'])}: {r['skipped']}"
        for i, r in enumerate((r for r in rows if r.get("skipped")), 1)
    ]


def table_cells(rows: list[dict]) -> tuple[list[str], list[list[str]]]:
    columns = [(k, t) for k, t in COLUMNS if k not in OPTIONAL or any(r.get(k) is not None for r in rows)]
    header = [title for _, title in columns]
    body = []
    n_skipped = 0
    for r in rows:
        if r.get("skipped"):
            n_skipped += 1
            cells = [
                r["engine"],
                r.get("kind", ""),
                str(r.get("size", r["n_docs"])),
                f"skipped [{n_skipped}]",
            ]
            body.append(cells + [""] * (len(columns) - len(cells)))
        else:
            body.append(
                [
                    _fmt(key, r.get(key)) if key not in {"engine", "kind", "size"} else str(r.get(key, ""))
                    for key, _ in columns
                ]
            )
    return header, body


def print_table(rows: list[dict], meta: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    header, body = table_cells(with_ratios(rows) + paper_rows(rows))
    table = Table(title=f"Search benchmark: {one_line(meta['hardware'])}", show_lines=False)
    for h in header:
        table.add_column(h, overflow="fold")
    for cells in body:
        table.add_row(*cells)
    console = Console(width=max(200, Console().width))
    console.print(table)
    for line in skip_notes(rows):
        console.print(line, markup=False)
    for line in _touched_lines(meta)[:1]:
        console.print(line, markup=False)
    console.print(
        f"Paper figures: {PAPER_HARDWARE}; they are q/s on all 10 cores, in the 'q/s all cores' column."
    )


def write_markdown(rows: list[dict], meta: dict, path: Path) -> None:
    header, body = table_cells(with_ratios(rows) + paper_rows(rows))
    lines = [
        "# Search benchmarks",
        "",
        f"Command: `{meta['command']}`",
        "",
        f"Hardware: {one_line(meta['hardware'])}. {PAPER_HARDWARE}.",
        "",
        f"Documents: {meta['documents']}. Queries: {meta['queries']}.",
        "",
        *_touched_lines(meta),
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" for _ in header) + "|",
    ]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |" for cells in body]
    notes = skip_notes(rows)
    if notes:
        lines += ["", "Skipped:", "", *[f"- {n}" for n in notes]]
    lines += ["", "Notes:", "", *[f"- {note}" for note in meta.get("notes", [])], ""]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines))


def _touched_lines(meta: dict) -> list[str]:
    touched = meta.get("postings_touched_per_query")
    if not touched:
        return []
    parts = ", ".join(f"{size}: {x:.2f} x N" for size, x in touched.items())
    return [f"Postings a query reads (sum of its terms' document frequencies), mean: {parts}.", ""]


def write_plot(rows: list[dict], meta: dict, path: Path) -> None:
    """Queries/s (one thread) against images, log-log, one line per engine; paper's as dashed lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 6), dpi=110)
    engines = list(dict.fromkeys(r["engine"] for r in rows))
    for name in engines:
        pts = sorted((r["n_docs"], r["qps_1"]) for r in rows if r["engine"] == name and r.get("qps_1"))
        if pts:
            ours = name.startswith("ours")
            ax.plot(
                *zip(*pts, strict=True),
                marker="o",
                linewidth=2.5 if ours else 1.2,
                label=f"{name} (1 thread)",
            )
    for series, table in PAPER_QPS.items():
        pts = sorted(table.items())
        ax.plot(*zip(*pts, strict=True), linestyle="--", marker="x", label=f"{series} (10 cores)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("images in the index")
    ax.set_ylabel("queries / second")
    ax.set_title(f"Top-10 search throughput vs index size\n{one_line(meta['hardware'])}", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


def write_json(rows: list[dict], meta: dict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps({"meta": meta, "rows": with_ratios(rows), "paper": PAPER_QPS}, indent=1, default=str)
    )
