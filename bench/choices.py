"""``vsparta bench choices``: every registered query weighting and reranker, measured on a real index.

The search path's named choices (``termindex/weightings/registry.py``, ``service/rerankers/registry.py``)
each go through the service's own pipeline (``bench/search_runs.py``) over the same index and the
same caption queries, in one run: each weighting (without a reranker) against ``counts``, each
reranker (with ``counts``) against none. The match rule is off (``require_match: false``): the
ranking alone is measured. Writes a table and its JSON, named by ``--name``, into ``--out-dir``.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path
from typing import Any

from vsparta.bench.search_runs import KS, answers, caption_queries, meta, recall, result_ids

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--index", required=True, help="backend spec of the index searched")
    parser.add_argument("--model", required=True, type=Path, help="model folder (its tokenizer.json)")
    parser.add_argument("--split", required=True, type=Path, help="manifest whose captions are the queries")
    parser.add_argument("--captions-per-image", type=int, help="at most this many captions per image")
    parser.add_argument("--name", default="choices", help="file name (default: choices)")
    parser.add_argument("--out-dir", type=Path, default=Path("docs/choices"), help="where they go")
    parser.add_argument("--no-write", action="store_true", help="print only")


def measure(args: argparse.Namespace) -> list[dict[str, Any]]:
    from vsparta.model.query_tokenizer import QueryTokenizer
    from vsparta.service.rerankers.registry import RERANKERS
    from vsparta.service.results import ResultView
    from vsparta.service.search import SearchPipeline, SearchQuery
    from vsparta.termindex.weightings.registry import DEFAULT, WEIGHTINGS

    tokenizer = QueryTokenizer.from_pretrained(args.model)
    captions = caption_queries(args.split, args.captions_per_image)
    view = ResultView(fields=frozenset())
    queries = [SearchQuery(text=c.text, k=max(KS), view=view, require_match=False) for c in captions]
    runs = [(w, None) for w in WEIGHTINGS.names()] + [(DEFAULT, r) for r in RERANKERS.names()]
    rows = []
    for weighting, reranker in runs:
        pipeline = SearchPipeline(
            tokenizer, weighting=weighting, reranker=None if reranker is None else RERANKERS.get(reranker)
        )
        responses, ms = answers(pipeline, args.index, queries)
        rows.append(
            {"weighting": weighting, "reranker": reranker or "none", "queries": len(captions),
             "recall": recall(result_ids(responses), captions), "ms_per_query": round(ms, 3)}
        )  # fmt: skip
        log.info("%s / %s: %s", weighting, reranker or "no reranker", rows[-1]["recall"])
    return rows


def markdown(rows: list[dict[str, Any]], info: dict[str, Any], args: argparse.Namespace) -> str:
    base = rows[0]["recall"]  # counts, no reranker
    lines = [
        f"# Query weightings and rerankers: {args.name}",
        "",
        f"Command: `{info['command']}`  ",
        f"Machine: {info['hardware']['cpu']}, {info['hardware']['cores']} cores (shared, load "
        f"{info['hardware']['load_avg_at_start']} at start); total {info['seconds']:.0f} s.",
        "",
        f"Index `{args.index}`, queries: the captions of `{args.split}` ({rows[0]['queries']}), each "
        "relevant to its own image; every run through the service's search pipeline (match rule off). "
        "Recall in %; d = the row minus counts without a reranker; ms: per query, whole pipeline.",
        "",
        "| weighting | reranker | R@1 | R@5 | R@10 | d R@1 | d R@5 | d R@10 | ms/query |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        rec = row["recall"]
        deltas = " | ".join(f"{rec[k] - base[k]:+.1f}" for k in ("R@1", "R@5", "R@10"))
        lines.append(
            f"| {row['weighting']} | {row['reranker']} | {rec['R@1']:.1f} | {rec['R@5']:.1f} | "
            f"{rec['R@10']:.1f} | {deltas} | {row['ms_per_query']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    rows = measure(args)
    info = meta("choices", time.perf_counter() - start)
    text = markdown(rows, info, args)
    print(text)  # noqa: T201 - the command's output
    if not args.no_write:
        args.out_dir.mkdir(parents=True, exist_ok=True)
        (args.out_dir / f"{args.name}.md").write_text(text, encoding="utf-8")
        (args.out_dir / f"{args.name}.json").write_text(
            json.dumps({"meta": info, "index": args.index, "split": str(args.split), "rows": rows}, indent=1),
            encoding="utf-8",
        )
        log.info("wrote %s/%s.{md,json}", args.out_dir, args.name)
    return 0
