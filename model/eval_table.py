"""``vsparta eval``'s printed table: one row per model and top-n cut, recall on each image set.

Apart from ``model.evaluate`` (the measuring), so that module stays one job; pure formatting.
"""

from __future__ import annotations

from typing import Any


def format_table(report: Any) -> str:
    """A plain-text table of an ``EvalReport``: one row per model / top-n, recall on each image set,
    NDCG@25, ms/query."""
    sets = list(report.rows[0]["recall"]) if report.rows else []
    head = ["model", "top-n", "weights", "terms/img"]
    for s in sets:
        head += [f"R@1 ({s})", f"R@5 ({s})", f"R@10 ({s})"]
    head += ["NDCG@25", "ms/query"]
    lines = [head]
    for row in report.rows:
        cells = [
            row["model"],
            str(row["top_n"]),
            row.get("query_weights", "-"),
            f"{row['terms_per_image']:.0f}" if "terms_per_image" in row else "-",
        ]
        for s in sets:
            cells += [f"{row['recall'][s][k]:.1f}" for k in ("R@1", "R@5", "R@10")]
        cells += [f"{row['ndcg@25']:.3f}", f"{row['ms_per_query']:.3f}"]
        lines.append(cells)
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    fmt = [" | ".join(c.rjust(w) for c, w in zip(line, widths, strict=True)) for line in lines]
    fmt.insert(1, "-+-".join("-" * w for w in widths))
    title = f"text-to-image retrieval: {report.n_images} images, {report.n_queries} queries (recall in %)"
    return "\n".join([title, *fmt])
