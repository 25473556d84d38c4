"""The top-n trade-off (paper Table 3 / Figure 1): latency per n here, recall from ``vsparta eval``.

Each image keeps only its n heaviest terms; for every n the engines are rebuilt and timed, and their
top-10 is compared with the exact top-10 over the *untruncated* documents (how much the ranking
moves when the index is pruned). Recall@K against captions needs the model and its captions:
``vsparta eval --top-n ... --json EVAL`` on the generated image benchmark; ``--eval-json EVAL``
joins it in, and ``docs/topn.md`` / ``docs/topn.png`` get the table and the recall-vs-latency plot.

    vsparta eval --manifest scenes/test.jsonl --model MODEL --top-n 5,10,20,50,100,all --json eval.json
    vsparta bench topn --size 113K --eval-json eval.json
"""

from __future__ import annotations

import argparse
import logging
import shutil
import time
from pathlib import Path

import numpy as np

from vsparta.bench import exact
from vsparta.bench.corpus import Corpus
from vsparta.bench.engines.base import Skip, cpu_count
from vsparta.bench.options import command_line, input_file, parse_size
from vsparta.bench.runner import RunConfig, measure_engine

log = logging.getLogger(__name__)

DEFAULT_TOP_N = "5,10,20,50,100,200,500,1000"


def truncate_top_n(corpus: Corpus, n: int) -> Corpus:
    """Keep each image's n heaviest terms (ascending ids within a row), like indexing with top-n."""
    if n < 1:
        raise ValueError(f"top-n must be >= 1, got {n}")
    lens = np.diff(np.asarray(corpus.indptr))
    keep_idx, keep_w, new_lens = [], [], np.minimum(lens, n)
    for i in range(corpus.n_docs):
        idx, w = corpus.row(i)
        if len(idx) > n:
            top = np.sort(np.argpartition(-np.asarray(w), n - 1)[:n])
            idx, w = idx[top], w[top]
        keep_idx.append(np.asarray(idx))
        keep_w.append(np.asarray(w))
    indptr = np.concatenate([[0], np.cumsum(new_lens)]).astype(np.int64)
    return Corpus(
        indptr,
        np.concatenate(keep_idx),
        np.concatenate(keep_w),
        corpus.vocab_size,
        corpus.ids,
        {k: v for k, v in corpus.meta.items() if not k.startswith("_")} | {"top_n": n},
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--size", default="5K", help="images (synthetic), e.g. 5K or 113K")
    parser.add_argument("--top-n", default=DEFAULT_TOP_N, help="comma list of n")
    parser.add_argument("--queries", type=int, default=200, help="queries timed per engine and n")
    parser.add_argument("--seed", type=int, default=0, help="seed of the generated corpus and queries")
    parser.add_argument("--engines", default="scipy,embedded", help="comma list: scipy, embedded, pisa")
    parser.add_argument(
        "--cache-dir", type=Path, default=Path(".cache/bench"), help="generated corpora, work dirs"
    )
    parser.add_argument("--term-docs", type=input_file, help="term-document JSONL instead of synthetic docs")
    parser.add_argument("--model", help="model folder with tokenizer.json (for --term-docs)")
    parser.add_argument("--n-terms", type=int, default=1000, help="terms per synthetic image before the cut")
    parser.add_argument(
        "--query-budget", type=float, default=10.0, help="stop timing an engine's queries after this (s)"
    )
    parser.add_argument("--eval-json", type=input_file, help="`vsparta eval --json` output: recall per top-n")
    parser.add_argument("--out-dir", type=Path, default=Path("docs"), help="topn.md/.png go here")
    parser.add_argument("--no-write", action="store_true", help="print only")


def run(args: argparse.Namespace) -> int:
    from vsparta.bench.engines.ours import EmbeddedAdapter
    from vsparta.bench.engines.pisa import PisaAdapter
    from vsparta.bench.engines.scipy_exact import ScipyAdapter
    from vsparta.bench.workload import corpora_and_queries

    top_ns = sorted({int(x) for x in args.top_n.split(",") if x.strip()})
    makers = {"scipy": ScipyAdapter, "embedded": EmbeddedAdapter, "pisa": lambda: PisaAdapter("maxscore")}
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    if bad := [e for e in engines if e not in makers]:
        raise ValueError(f"unknown engine(s) {bad}; choose from {', '.join(makers)}")
    corpora, make_queries, _ = corpora_and_queries(args, [parse_size(args.size)], args.queries)
    full = corpora[0][1]()
    queries = make_queries(full)
    oracle = exact.StreamingOracle(full, queries, 10)
    cfg = RunConfig(n_queries=args.queries, query_budget_s=args.query_budget, threads=cpu_count())
    rows = []
    for n in top_ns:
        t0 = time.perf_counter()
        corpus = truncate_top_n(full, n)
        log.info("top-%d: %d postings (truncated in %.1f s)", n, corpus.nnz, time.perf_counter() - t0)
        for name in engines:
            adapter = makers[name]()
            row = {"top_n": n, "engine": adapter.name}
            workdir = args.cache_dir / "topn" / f"{name}-{n}"
            shutil.rmtree(workdir, ignore_errors=True)  # as the runner does: never an old run's files
            try:
                adapter.check(corpus, 2**62)
                row |= measure_engine(adapter, corpus, queries, cfg, workdir, oracle)
            except Skip as e:
                row["skipped"] = str(e)
            finally:
                adapter.close()
                shutil.rmtree(workdir, ignore_errors=True)
            rows.append(row)
    print(f"{'top-n':>6}  {'engine':<28} {'p50 ms':>8} {'q/s 1 thr':>10} {'agree vs full':>14} {'B/term':>7}")
    for r in rows:
        if r.get("skipped"):
            print(f"{r['top_n']:>6}  {r['engine']:<28} skipped: {r['skipped']}")
            continue
        print(
            f"{r['top_n']:>6}  {r['engine']:<28} {r['p50_ms']:>8.3f} {r['qps_1']:>10.0f} "
            f"{r.get('agreement', float('nan')):>14.3f} {r.get('bytes_per_term', float('nan')):>7.2f}"
        )
    if args.eval_json is None:
        print("Recall@K per top-n (the other axis of the paper's Figure 1): `vsparta eval` (model).")
    if not args.no_write:
        _write(args, rows, full)
    return 0


def _write(args: argparse.Namespace, rows: list[dict], full: Corpus) -> None:
    from vsparta.bench import hardware, topn_report

    eval_json = topn_report.load_eval(args.eval_json)
    table = topn_report.joined(rows, eval_json)
    meta = {
        "command": command_line("topn"),
        "hardware": hardware.describe(),
        "latency_size": f"{full.n_docs:,}",
        "latency_source": f"{full.n_docs:,} images x top-n of {args.n_terms} terms "
        + (f"from {args.term_docs}" if args.term_docs else f"(synthetic, seed {args.seed})")
        + f", {args.queries} queries, one thread; top-10 vs full = share of the exact top-10 over "
        "untruncated documents that the truncated index still returns.",
        "recall_source": (
            f"`vsparta eval` report {args.eval_json} ({eval_json['n_images']:,} images, "
            f"{eval_json['n_queries']:,} captions): R@K on the largest image set it reports. A model keeps "
            "only its positive terms, so every n at or above its terms/image equals 'all' and repeats "
            "that row's recall."
            if eval_json
            else "none (give --eval-json)"
        ),
        "notes": ["Paper: Table 3 (R@K vs top-n on COCO/Flickr30K) and Figure 1 (R@1 vs latency)."],
    }
    args.out_dir.mkdir(parents=True, exist_ok=True)
    topn_report.write_markdown(table, meta, args.out_dir / "topn.md")
    topn_report.write_plot(table, meta, args.out_dir / "topn.png")
    log.info("wrote %s/topn.{md,png}", args.out_dir)
