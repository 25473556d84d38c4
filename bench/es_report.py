"""Render the Elasticsearch measurements (docs/es-*.json) as the tables of docs/elasticsearch.md.

    python -m bench.es_report            # rewrites the block between the markers in the page

The page's prose is written by hand; only the part between ``<!-- es-tables -->`` markers is
generated, so every figure there comes from a JSON row carrying its command and machine.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

START, END = "<!-- es-tables:start -->", "<!-- es-tables:end -->"


def _rows(path: Path) -> list[dict]:
    return json.loads(path.read_text()) if path.exists() else []


def _machine(row: dict) -> str:
    m = row.get("machine", {})
    load = m.get("load_avg_at_start")
    return f"{m.get('cpu', '?')}, {m.get('cores', '?')} cores, shared (load avg at start {load})"


def _machines(rows: list[dict]) -> str:
    """One line for rows of one machine: the 1-minute load average at start as a range."""
    machines = [r.get("machine", {}) for r in rows]
    kinds = {(m.get("cpu", "?"), m.get("cores", "?")) for m in machines}
    loads = [m["load_avg_at_start"][0] for m in machines if m.get("load_avg_at_start")]
    if len(kinds) != 1 or not loads:
        return "; ".join(dict.fromkeys(_machine(r) for r in rows))
    ((cpu, cores),) = kinds
    return f"{cpu}, {cores} cores, shared (1-minute load average at start {min(loads)}-{max(loads)})"


def load_table(rows: list[dict], title: str) -> list[str]:
    if not rows:
        return []
    out = [
        f"### {title}",
        "",
        "| run | write path | nodes | docs | terms/doc | docs/s | B/term loaded | B/term merged | merge s |",
    ]
    out.append("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        options = ", ".join(f"{k}={v}" for k, v in r.get("options", {}).items())
        label = r["label"] + (f" ({options})" if options else "")
        out.append(
            f"| {label} | {r['write_path']} | {r['nodes']} | {r['docs']:,} | "
            f"{r.get('terms_per_doc', 1000):,} | {r['docs_per_s']:.0f} | "
            f"{r['bytes_per_term_after_load']} | {r['bytes_per_term_after_merge']} | {r['force_merge_s']} |"
        )
    out += ["", "Commands, in order: " + "; ".join(f"`{r['command']}`" for r in rows) + ".", ""]
    out += [f"Machine: {_machines(rows)}.", ""]
    return out


def query_table(rows: list[dict]) -> list[str]:
    if not rows:
        return []
    out = ["### Query latency by layout (one query at a time, interleaved)", ""]
    out.append(
        "| corpus | images | shards | codec | layout | algorithm | p50 ms | p99 ms | top-10 identical "
        "| top-10 agree | segments | B/term |"
    )
    out.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        out.append(
            f"| {r['corpus']} | {r['docs']:,} | {r['shards']} | {r.get('codec', 'default')} | "
            f"{r['layout']} | "
            f"{r['algorithm']} | {r['p50_ms']} | {r['p99_ms']} | {r['top10_identical']:.3f} | "
            f"{r['top10_agree']:.4f} | {r['segments']} | {r['bytes_per_term']} |"
        )
    commands = list(dict.fromkeys(r["command"] for r in rows))
    out += ["", "Commands: " + "; ".join(f"`{c}`" for c in commands) + ".", ""]
    out += [f"Machine: {_machines(rows)}.", ""]
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--docs-dir", type=Path, default=Path("docs"))
    args = p.parse_args(argv)
    d = args.docs_dir
    lines = [START, ""]
    lines += load_table(_rows(d / "es-load.json"), "Loads into one node (1,000-term documents)")
    lines += load_table(_rows(d / "es-load-cluster.json"), "Loads into the three-node cluster")
    lines += query_table(_rows(d / "es-query.json"))
    lines.append(END)
    page = d / "elasticsearch.md"
    text = page.read_text()
    a, b = text.index(START), text.index(END) + len(END)
    page.write_text(text[:a] + "\n".join(lines) + text[b:])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
