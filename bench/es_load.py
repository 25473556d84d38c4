"""Elasticsearch load speed: documents/s of 1,000-term documents, and bytes per term after merging.

    python -m bench.es_load --docs 20000 --es-url http://127.0.0.1:9200 --label after
    PYTHONPATH=/tmp/main-termindex python -m bench.es_load --docs 20000 --label before

The second form measures another tree's ``termindex`` (e.g. ``git archive main termindex``)
with this benchmark, so before and after run the same corpus in the same session. The engine
loads inside ``bulk_load()``: through ``upsert_arrays`` in slices of 10,000 documents when
the engine overrides it (no Python object per term; the engine keeps its connections busy
while it builds the next chunks), else the way the old benchmark adapter did (``upsert`` of
1,000-document ``TermDocument`` batches from two threads).
Also ``green_s``: seconds from the load's start until the index is green, every replica copied
(a load that drops replicas copies them after; ``--option keep_replicas=0`` vs ``=1``).
Prints one row and appends it to ``--json``.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from vsparta.bench.corpus import Corpus
from vsparta.bench.hardware import describe
from vsparta.bench.synthetic import SyntheticSpec, load_or_generate
from vsparta.termindex.base import TermIndex
from vsparta.termindex.registry import quiet_client_loggers

log = logging.getLogger(__name__)
CHUNK = 1000  # documents per write for the old path (one upsert each, from 2 threads)
ARRAY_SLICE = 10_000  # documents per upsert_arrays call: the sender pipelines within a call


def es_get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=60) as resp:
        return json.loads(resp.read())


def load(index: TermIndex, corpus: Corpus) -> str:
    """Write every row of ``corpus``; returns which write path was used."""
    arrays = type(index).upsert_arrays is not TermIndex.upsert_arrays
    with index.bulk_load():
        if arrays:
            corpus.upsert_into(index, ARRAY_SLICE)
            return "upsert_arrays"
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(lambda c: index.upsert(corpus.term_documents(*c)), corpus.chunks(CHUNK)))
        return "upsert, 2 threads"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--es-url", default="http://127.0.0.1:9200")
    p.add_argument("--docs", type=int, default=20_000)
    p.add_argument("--terms", type=int, default=1000)
    p.add_argument("--label", default="this tree")
    p.add_argument("--cache-dir", type=Path, default=Path(".cache/bench"))
    p.add_argument("--json", type=Path, default=Path("docs/es-load.json"))
    p.add_argument("--keep", action="store_true", help="keep the index (prints its name)")
    p.add_argument("--option", action="append", default=[], metavar="K=V", help="engine option")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    quiet_client_loggers(logging.WARNING)

    from vsparta.termindex.elastic.index import ElasticsearchIndex

    corpus = load_or_generate(
        SyntheticSpec(n_docs=args.docs, n_terms=args.terms), args.cache_dir / "synthetic"
    )
    options = {k: int(v) if v.isdigit() else v for k, v in (o.split("=", 1) for o in args.option)}
    name = f"bench-load-{uuid.uuid4().hex[:8]}"
    health = es_get(f"{args.es_url}/_cluster/health")
    index = ElasticsearchIndex(args.es_url, name, create=True, **options)
    try:
        t0 = time.perf_counter()
        path = load(index, corpus)
        seconds = time.perf_counter() - t0
        # Served as configured: every replica copied (a load without replicas copies them after).
        es_get(f"{args.es_url}/_cluster/health/{name}?wait_for_status=green&timeout=600s")
        green_s = time.perf_counter() - t0
        assert index.count() == corpus.n_docs, (index.count(), corpus.n_docs)
        segments_loaded = int(
            es_get(f"{args.es_url}/{name}/_stats/segments")["_all"]["primaries"]["segments"]["count"]
        )
        bytes_loaded = int(
            es_get(f"{args.es_url}/{name}/_stats/store")["_all"]["primaries"]["store"]["size_in_bytes"]
        )
        t1 = time.perf_counter()
        urllib.request.urlopen(
            urllib.request.Request(f"{args.es_url}/{name}/_forcemerge?max_num_segments=1", method="POST"),
            timeout=3600,
        ).read()
        merge_s = time.perf_counter() - t1
        for action in ("_refresh", "_flush"):  # release the merged-away segments before measuring
            req = urllib.request.Request(f"{args.es_url}/{name}/{action}", method="POST")
            urllib.request.urlopen(req, timeout=600).read()
        stats = es_get(f"{args.es_url}/{name}/_stats/store,segments")["_all"]["primaries"]
        row = {
            "label": args.label,
            "write_path": path,
            "nodes": health["number_of_nodes"],
            "docs": corpus.n_docs,
            "terms_per_doc": args.terms,
            "options": options,
            "load_s": round(seconds, 1),
            "docs_per_s": round(corpus.n_docs / seconds, 1),
            "green_s": round(green_s, 1),
            "segments_after_load": segments_loaded,
            "bytes_per_term_after_load": round(bytes_loaded / corpus.nnz, 2),
            "force_merge_s": round(merge_s, 1),
            "segments_after_merge": int(stats["segments"]["count"]),
            "bytes_per_term_after_merge": round(int(stats["store"]["size_in_bytes"]) / corpus.nnz, 2),
            "machine": describe(),
            "command": "python -m bench.es_load " + " ".join(sys.argv[1:] if argv is None else argv),
        }
    finally:
        if not args.keep:
            index.drop()
        index.close()
    print(
        f"{row['label']:>12} {row['nodes']} node(s) {row['docs']} docs: "
        f"{row['docs_per_s']:.0f} docs/s ({path}), green after {row['green_s']}s; "
        f"{row['bytes_per_term_after_load']} B/term in {row['segments_after_load']} segments, "
        f"{row['bytes_per_term_after_merge']} B/term after merge to {row['segments_after_merge']} "
        f"({row['force_merge_s']}s)"
    )
    rows = json.loads(args.json.read_text()) if args.json.exists() else []
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps([*rows, row], indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
