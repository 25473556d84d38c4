"""Quick micro-benchmark of the embedded engine against exhaustive scipy.sparse scoring.

Not a test: it prints figures. Synthetic documents with a Zipf document frequency over the
BERT vocabulary, ~``--terms`` distinct terms each; caption-like queries of 8-12 skewed tokens.
Both engines score the same half-float weights; the top-10 ids are checked to agree.

    OMP_NUM_THREADS=1 PYTHONPATH=. python bench/embedded_quick.py --docs 100000 --terms 1000
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import tempfile
import time

import numpy as np
import scipy.sparse as sp
from numba import njit

from termindex.embedded import EmbeddedIndex
from termindex.oracle import round_like_embedded

log = logging.getLogger("bench.embedded_quick")


@njit(cache=True)
def _sample_documents(n_docs, n_terms, cdf, seed):
    """Each document draws ``n_terms`` distinct term ids from the Zipf distribution ``cdf``."""
    np.random.seed(seed)
    vocab = cdf.shape[0]
    indptr = np.zeros(n_docs + 1, dtype=np.int64)
    terms = np.empty(n_docs * n_terms, dtype=np.int32)
    seen = np.full(vocab, -1, dtype=np.int64)
    pos = 0
    for d in range(n_docs):
        got = 0
        tries = 0
        while got < n_terms and tries < 50 * n_terms:
            tries += 1
            t = np.searchsorted(cdf, np.random.random())
            if t >= vocab or seen[t] == d:
                continue
            seen[t] = d
            terms[pos] = t
            pos += 1
            got += 1
        indptr[d + 1] = pos
    return indptr, terms[:pos]


def zipf_cdf(vocab: int, s: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """CDF over term ids with a Zipf(s) popularity assigned to a random permutation of ids."""
    p = np.arange(1, vocab + 1, dtype=np.float64) ** -s
    p /= p.sum()
    perm = np.random.default_rng(seed).permutation(vocab)
    by_id = np.empty(vocab)
    by_id[perm] = p
    return np.cumsum(by_id), by_id


def make_queries(n: int, by_id: np.ndarray, seed: int) -> list[dict[int, float]]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        q: dict[int, float] = {}
        for t in rng.choice(len(by_id), size=int(rng.integers(8, 13)), p=by_id):
            q[int(t)] = q.get(int(t), 0.0) + 1.0
        out.append(q)
    return out


def scipy_topk(csc: sp.csc_matrix, q: dict[int, float], k: int) -> np.ndarray:
    """Exhaustive scoring: one sparse column slice times the boosts, then a partial sort."""
    terms = np.fromiter(q.keys(), dtype=np.int64)
    boosts = np.fromiter(q.values(), dtype=np.float32)
    scores = csc[:, terms] @ boosts
    top = np.argpartition(-scores, k)[:k]
    return top[np.argsort(-scores[top], kind="stable")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=100_000)
    ap.add_argument("--terms", type=int, default=1000, help="terms per document")
    ap.add_argument("--vocab", type=int, default=30_522)
    ap.add_argument("--zipf", type=float, default=1.0)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--segment-docs", type=int, default=50_000, help="documents per upsert batch")
    ap.add_argument("--dir", default=None, help="index directory (default: a temp dir)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")

    cdf, by_id = zipf_cdf(args.vocab, args.zipf, args.seed)
    t0 = time.perf_counter()
    indptr, terms = _sample_documents(args.docs, args.terms, cdf, args.seed)
    rng = np.random.default_rng(args.seed)
    weights = rng.lognormal(-0.5, 0.8, size=len(terms)).astype(np.float32)
    log.info("generated %d docs, %d postings in %.1fs", args.docs, len(terms), time.perf_counter() - t0)

    root = args.dir or tempfile.mkdtemp(prefix="embedded-bench-")
    index = EmbeddedIndex(os.path.join(root, "idx"), create=True, vocab_size=args.vocab)
    t0 = time.perf_counter()
    ids = [f"img{i:07d}" for i in range(args.docs)]
    for start in range(0, args.docs, args.segment_docs):
        stop = min(args.docs, start + args.segment_docs)
        a, b = indptr[start], indptr[stop]
        index.upsert_arrays(ids[start:stop], indptr[start : stop + 1] - a, terms[a:b], weights[a:b])
    index.compact()
    build_s = time.perf_counter() - t0
    stats = index.stats()
    log.info("built in %.1fs: %s", build_s, stats)

    rows = np.repeat(np.arange(args.docs), np.diff(indptr))
    logw = np.log1p(round_like_embedded(weights)).astype(np.float32)
    csc = sp.csc_matrix((logw, (rows, terms)), shape=(args.docs, args.vocab))
    queries = make_queries(args.queries, by_id, args.seed + 1)

    for q in queries[:5]:  # warm up: JIT, page cache
        index.search(q)
        scipy_topk(csc, q, 10)
    ours, theirs, agree = [], [], 0
    for q in queries:
        t = time.perf_counter()
        hits = index.search(q, k=10)
        ours.append(time.perf_counter() - t)
        t = time.perf_counter()
        top = scipy_topk(csc, q, 10)
        theirs.append(time.perf_counter() - t)
        agree += {h.id for h in hits} == {ids[i] for i in top}
    ours_a, theirs_a = np.array(ours) * 1e3, np.array(theirs) * 1e3
    report = {
        "docs": args.docs,
        "terms_per_doc": round(len(terms) / args.docs, 1),
        "postings": stats["postings"],
        "bytes_per_term": round(stats["bytes_per_posting"], 3),
        "build_s": round(build_s, 1),
        "embedded_p50_ms": round(float(np.median(ours_a)), 3),
        "embedded_p99_ms": round(float(np.percentile(ours_a, 99)), 3),
        "embedded_qps": round(len(ours) / (ours_a.sum() / 1e3), 1),
        "scipy_p50_ms": round(float(np.median(theirs_a)), 3),
        "scipy_qps": round(len(theirs) / (theirs_a.sum() / 1e3), 1),
        "speedup_vs_scipy_p50": round(float(np.median(theirs_a) / np.median(ours_a)), 2),
        "top10_set_agreement": agree / len(queries),
    }
    print(json.dumps(report, indent=1))  # noqa: T201 - a benchmark prints its figures


if __name__ == "__main__":
    main()
