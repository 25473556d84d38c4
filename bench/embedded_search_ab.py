"""Per-query CPU time and documents rescored by the embedded engine, for comparing two trees.

Builds one compacted index of ``N`` synthetic documents (1000 Zipf-distributed terms each,
φ-like weights, mostly < 5), runs 1000 caption-like queries, and prints one JSON line: CPU
microseconds per query (thread time: this machine is shared, so wall time is noisy), documents
rescored per query, and a hash of the top-10 (id, score) lists, which must be equal across
trees. Run it once per source tree, e.g. an export of a commit from before the embedded split (its
top-level packages are imported from that tree) and once for this checkout:

    git archive OLD | tar -x -C /tmp/old
    python bench/embedded_search_ab.py /tmp/old 113000
    python bench/embedded_search_ab.py . 113000
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def _count_rescored_old(index, queries) -> int:  # the tree before the search split
    import termindex.embedded_kernels as kern  # type: ignore[import-not-found]

    real = kern.gather_weights
    count = 0

    def counting(*args):
        nonlocal count
        count += len(args[-1])
        return real(*args)

    kern.gather_weights = counting
    try:
        for q in queries:
            index.search(q, k=10)
    finally:
        kern.gather_weights = real
    return count


def _count_rescored_new(index, queries) -> int:
    from vsparta.termindex.embedded.scoring import bound_range, search_segment
    from vsparta.termindex.embedded.search import _Query
    from vsparta.termindex.embedded.weights import quant_tables, saturation_table

    seg = index._snap.segments[0]
    count = 0
    for q in queries:
        query = _Query(q)
        margin, step_slack, bounds = query.segment_params(seg.quant_step)
        present = query.qterms < seg.n_terms
        a32, _, _ = search_segment(
            query.qterms[present], query.boosts32[present], *seg.postings, seg.quant, seg.blockmax,
            saturation_table(), quant_tables(seg.quant_step), seg.deleted, seg.n_docs, seg.n_blocks,
            seg.block_shift, 10, np.float32(-np.inf), margin, step_slack,
        )  # fmt: skip
        if len(a32) > 10:
            lo, hi = bound_range(a32, bounds)
            count += int((hi >= np.partition(lo, len(lo) - 10)[len(lo) - 10]).sum())
        else:
            count += len(a32)
    return count


def main(tree: str, n: int) -> dict:
    sys.path.insert(0, str(Path(tree).resolve()))
    if (Path(tree) / "termindex" / "embedded_kernels.py").exists():  # a tree from before the split
        from bench.embedded_quick import _sample_documents, zipf_cdf  # type: ignore[import-not-found]
        from termindex.embedded import EmbeddedIndex  # type: ignore[import-not-found]
    else:  # this checkout, installed as vsparta.*
        from vsparta.bench.embedded_quick import _sample_documents, zipf_cdf
        from vsparta.termindex.embedded.index import EmbeddedIndex

    cdf, _ = zipf_cdf(30522, 1.0, 0)
    indptr, terms = _sample_documents(n, 1000, cdf, 1)
    weights = np.random.default_rng(0).lognormal(-0.7, 0.6, len(terms))
    index = EmbeddedIndex(tempfile.mkdtemp(), create=True, vocab_size=30522)
    for s in range(0, n, 20_000):
        e = min(n, s + 20_000)
        a, b = indptr[s], indptr[e]
        index.upsert_arrays([f"i{i}" for i in range(s, e)], indptr[s : e + 1] - a, terms[a:b], weights[a:b])
    index.compact()
    rng = np.random.default_rng(1)
    queries = [{int(t): 1.0 for t in np.searchsorted(cdf, rng.random(10))} for _ in range(1000)]
    try:
        rescored = _count_rescored_old(index, queries)
    except ImportError:
        rescored = _count_rescored_new(index, queries)
    for q in queries[:100]:
        index.search(q, k=10)
    times = []
    for _ in range(5):
        t0 = time.thread_time()
        for q in queries:
            index.search(q, k=10)
        times.append((time.thread_time() - t0) / len(queries))
    top = [[(h.id, h.score) for h in index.search(q, k=10)] for q in queries[:200]]
    return {
        "tree": tree,
        "documents": n,
        "cpu_us_per_query_min": round(min(times) * 1e6, 1),
        "cpu_us_per_query_median": round(sorted(times)[2] * 1e6, 1),
        "rescored_per_query": rescored / len(queries),
        "top10_hash": hashlib.md5(repr(top).encode()).hexdigest(),
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], int(sys.argv[2]))))
