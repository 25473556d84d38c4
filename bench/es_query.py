"""Elasticsearch query latency by index layout, checked against the exact oracle.

    python -m bench.es_query --corpus model-shaped --profile docs/model-profile.npz \\
        --captions scenes/test.jsonl --tokenizer runs/final --docs 100000
    python -m bench.es_query --corpus adversarial --docs 100000

One load (``upsert_arrays``) per setup (``--shards`` x ``--codec``), three layouts of each side
by side (``_clone``): as loaded, force-merged to one segment per shard, and that with
``index.store.preload`` of the postings and term dictionary; each searched with Lucene's
default (score every match) and block-max WAND (``track_total_hits: false``). Everything is
built first, then every query runs on every variant in a rotating order, so that load bursts
on a shared machine hit all variants alike. Top-10 lists are compared with an exact float64 oracle over the
weights as Elasticsearch stores them (9 significant bits): "identical" is the share of
queries whose ES top-10 ids equal the oracle's, in order (ties by id); "agree" counts
near-ties as found (bench.exact.agreement). Prints a table and appends rows to ``--json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from vsparta.bench.corpus import Corpus, Query
from vsparta.bench.exact import agreement, build_matrix, scores, top_k
from vsparta.bench.hardware import describe
from vsparta.termindex.oracle import round_like_elasticsearch
from vsparta.termindex.registry import quiet_client_loggers

log = logging.getLogger(__name__)
PRELOAD = ["nvd", "dvd", "tim", "doc", "dim"]


def es(url: str, method: str = "GET", body: Any = None, timeout: float = 3600) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read() or b"{}")


def corpus_and_queries(args: argparse.Namespace) -> tuple[Corpus, list[Query]]:
    if args.corpus == "adversarial":
        from vsparta.bench.synthetic import SyntheticSpec, generate_queries, load_or_generate

        corpus = load_or_generate(SyntheticSpec(n_docs=args.docs), args.cache_dir / "synthetic")
        return corpus, generate_queries(args.queries)
    from vsparta.bench.model_shaped import load_or_generate as shaped
    from vsparta.model.query_tokenizer import QueryTokenizer

    corpus = shaped(args.profile, args.docs, args.cache_dir / "model-shaped")
    tok = QueryTokenizer.from_pretrained(args.tokenizer)
    queries: list[Query] = []
    with open(args.captions, encoding="utf-8") as f:
        for line in f:
            for caption in json.loads(line).get("captions", []):
                q: Query = {}
                for t in tok.tokenize(caption):
                    q[t] = q.get(t, 0.0) + 1.0
                if q:
                    queries.append(q)
    rng = np.random.default_rng(0)
    picked = rng.choice(len(queries), size=min(args.queries, len(queries)), replace=False)
    return corpus, [queries[i] for i in picked]


def measure(
    engines: dict[str, Any], corpus: Corpus, queries: list[Query], oracle: list[tuple[np.ndarray, np.ndarray]]
) -> dict[str, dict]:
    """Every query on every engine, interleaved in a rotating order, so that a burst of load on
    this shared machine hits all of them alike (numbers are compared within one run)."""
    for engine in engines.values():
        for q in queries[:20]:  # warm-up: caches, JIT
            engine.search(q, k=10)
    names = list(engines)
    times: dict[str, list[float]] = {n: [] for n in names}
    identical = dict.fromkeys(names, 0)
    agree = dict.fromkeys(names, 0.0)
    for j, (q, (exact_scores, best)) in enumerate(zip(queries, oracle, strict=True)):
        for n in names[j % len(names) :] + names[: j % len(names)]:
            t0 = time.perf_counter()
            hits = engines[n].search(q, k=10)
            times[n].append(time.perf_counter() - t0)
            rows = [corpus.row_of(h.id) for h in hits]
            identical[n] += rows == best.tolist()
            agree[n] += agreement(rows, exact_scores, 10)
    out = {}
    for n in names:
        ms = np.array(times[n]) * 1000
        out[n] = {
            "p50_ms": round(float(np.percentile(ms, 50)), 2),
            "p99_ms": round(float(np.percentile(ms, 99)), 2),
            "top10_identical": round(identical[n] / len(queries), 3),
            "top10_agree": round(agree[n] / len(queries), 4),
        }
    return out


def build_layouts(url: str, index: Any, corpus: Corpus) -> tuple[dict[str, str], float]:
    """Load ``corpus`` into ``index``; then three layouts side by side (clones share files until
    merged): as loaded, force-merged, force-merged with preload. Returns them and the load time."""
    t0 = time.perf_counter()
    with index.bulk_load():
        corpus.upsert_into(index, 10_000)
    load_s = time.perf_counter() - t0
    assert index.count() == corpus.n_docs
    (concrete,) = index._concrete()
    es(f"{url}/{concrete}/_settings", "PUT", {"index.blocks.write": True})
    layouts = {"as loaded": concrete, "force-merged": f"{concrete}-merged"}
    layouts["force-merged + preload"] = f"{concrete}-preload"
    same = {"index.number_of_replicas": 0}  # a clone does not inherit it
    es(f"{url}/{concrete}/_clone/{layouts['force-merged']}", "POST", {"settings": same})
    es(f"{url}/{layouts['force-merged']}/_forcemerge?max_num_segments=1", "POST")
    preload = {"settings": same | {"index.store.preload": PRELOAD}}
    es(f"{url}/{layouts['force-merged']}/_clone/{layouts['force-merged + preload']}", "POST", preload)
    es(f"{url}/_cluster/health/{concrete}*?wait_for_status=green&timeout=120s")
    return layouts, load_s


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--es-url", default="http://127.0.0.1:9200")
    p.add_argument("--corpus", choices=["model-shaped", "adversarial"], default="model-shaped")
    p.add_argument("--profile", type=Path, default=Path("docs/model-profile.npz"))
    p.add_argument("--captions", type=Path, help="scene manifest whose captions are the queries")
    p.add_argument("--tokenizer", type=Path, help="model folder (tokenizer) for the captions")
    p.add_argument("--docs", type=int, default=20_000)
    p.add_argument("--queries", type=int, default=300)
    p.add_argument("--shards", default="1", help="comma-separated shard counts to compare")
    p.add_argument("--codec", default="default", help="comma-separated index codecs to compare")
    p.add_argument("--cache-dir", type=Path, default=Path(".cache/bench"))
    p.add_argument("--json", type=Path, default=Path("docs/es-query.json"))
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    quiet_client_loggers(logging.WARNING)
    from vsparta.termindex.elastic.index import ElasticsearchIndex

    corpus, queries = corpus_and_queries(args)
    log.info("corpus %s: %d images, %.0f terms each; %d queries", args.corpus, corpus.n_docs,
             corpus.nnz / corpus.n_docs, len(queries))  # fmt: skip
    rounded = Corpus(
        corpus.indptr, corpus.indices, round_like_elasticsearch(corpus.weights), corpus.vocab_size
    )
    matrix = build_matrix(rounded)
    oracle = []
    for q in queries:
        s = scores(matrix, q).astype(np.float64)
        oracle.append((s, top_k(s, 10)))
    del matrix
    rows = []
    health = es(f"{args.es_url}/_cluster/health")
    setups = [(int(s), c) for s in args.shards.split(",") for c in args.codec.split(",")]
    built: list[tuple[int, str, dict[str, str], float]] = []
    created: list[ElasticsearchIndex] = []
    readers: list[ElasticsearchIndex] = []
    engines: dict[tuple[int, str, str, str], Any] = {}
    try:
        for shards, codec in setups:  # every setup built first, then all measured interleaved
            name = f"bench-query-{uuid.uuid4().hex[:8]}"
            index = ElasticsearchIndex(
                args.es_url, name, create=True, shards=shards, merge_segments=0, codec=codec, replicas=0
            )
            created.append(index)
            layouts, load_s = build_layouts(args.es_url, index, corpus)
            built.append((shards, codec, layouts, load_s))
            for layout, target in layouts.items():
                for algo, score_all in (("score all", True), ("block-max WAND", False)):
                    engine = ElasticsearchIndex(args.es_url, target, track_total_hits=score_all)
                    readers.append(engine)
                    engines[(shards, codec, layout, algo)] = engine
        results = measure(engines, corpus, queries, oracle)
        loads = {(shards, codec): (layouts, load_s) for shards, codec, layouts, load_s in built}
        for (shards, codec, layout, algo), figures in results.items():
            layouts, load_s = loads[shards, codec]
            stats = es(f"{args.es_url}/{layouts[layout]}/_stats/segments,store")["_all"]["primaries"]
            row = {
                "corpus": args.corpus,
                "docs": corpus.n_docs,
                "terms_per_doc": round(corpus.nnz / corpus.n_docs, 1),
                "nodes": health["number_of_nodes"],
                "shards": shards,
                "codec": codec,
                "layout": layout,
                "algorithm": algo,
                "segments": int(stats["segments"]["count"]),
                "bytes_per_term": round(int(stats["store"]["size_in_bytes"]) / corpus.nnz, 2),
                "load_docs_per_s": round(corpus.n_docs / load_s, 1),
            } | figures
            rows.append(row)
            print(
                f"{row['corpus']:>12} {row['docs']:>8} {shards} shard(s) {codec:<16} {layout:<22} {algo:<14} "
                f"p50 {row['p50_ms']:7.2f} ms  p99 {row['p99_ms']:7.2f} ms  identical "
                f"{row['top10_identical']:.3f}  agree {row['top10_agree']:.4f}  "
                f"{row['segments']} seg  {row['bytes_per_term']} B/term",
                flush=True,
            )
    finally:
        for engine in readers:
            engine.close()
        for index in created:
            for clone in ("merged", "preload"):
                with contextlib.suppress(urllib.error.HTTPError):
                    es(f"{args.es_url}/{index.alias}-v1-{clone}", "DELETE")
            index.drop()
            index.close()
    meta = {
        "machine": describe(),
        "command": "python -m bench.es_query " + " ".join(sys.argv[1:] if argv is None else argv),
    }
    old = json.loads(args.json.read_text()) if args.json.exists() else []
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps([*old, *[r | meta for r in rows]], indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
