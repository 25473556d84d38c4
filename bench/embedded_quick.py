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

from vsparta.termindex.embedded.index import EmbeddedIndex
from vsparta.termindex.embedded.weights import round_like_embedded
from vsparta.termindex.scoring import saturate_array

log = logging.getLogger("vsparta.bench.embedded_quick")


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
    ap.add_argument(
        "--segment-docs", type=int, default=50_000, help="documents generated and upserted at once"
    )
    ap.add_argument("--dir", default=None, help="index directory (default: a temp dir)")
    ap.add_argument(
        "--no-scipy", action="store_true", help="skip the scipy baseline (needs ~8 bytes/term RAM)"
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--reuse", action="store_true", help="only time queries on the index already in --dir")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")

    cdf, by_id = zipf_cdf(args.vocab, args.zipf, args.seed)
    root = args.dir or tempfile.mkdtemp(prefix="embedded-bench-")
    path = os.path.join(root, "idx")
    reuse = args.reuse and os.path.exists(os.path.join(path, "manifest.json"))
    if reuse:
        args.no_scipy = True  # the documents are not regenerated
    # few large segments while loading, one merge at the end
    index = EmbeddedIndex(path, create=True, vocab_size=args.vocab)
    gen_s = build_s = 0.0
    keep = []  # (indptr, terms, weights) kept for the scipy baseline
    for c, start in enumerate(range(0, 0 if reuse else args.docs, args.segment_docs)):
        stop = min(args.docs, start + args.segment_docs)
        t0 = time.perf_counter()
        indptr, terms = _sample_documents(stop - start, args.terms, cdf, args.seed * 1000 + c)
        rng = np.random.default_rng([args.seed, c])
        weights = rng.lognormal(-0.5, 0.8, size=len(terms)).astype(np.float32)
        gen_s += time.perf_counter() - t0
        t0 = time.perf_counter()
        index.upsert_arrays([f"img{i:07d}" for i in range(start, stop)], indptr, terms, weights)
        build_s += time.perf_counter() - t0
        if not args.no_scipy:
            keep.append((indptr, terms, weights))
        log.info("chunk %d: %d docs (generate %.0fs, index %.0fs so far)", c, stop - start, gen_s, build_s)
    t0 = time.perf_counter()
    index.compact()
    build_s += time.perf_counter() - t0
    stats = index.stats()
    log.info("built in %.1fs: %s", build_s, stats)
    ids = [f"img{i:07d}" for i in range(args.docs)]
    queries = make_queries(args.queries, by_id, args.seed + 1)
    csc = None
    if not args.no_scipy:
        rows = np.concatenate(
            [
                np.repeat(np.arange(len(p) - 1), np.diff(p)) + n * args.segment_docs
                for n, (p, _, _) in enumerate(keep)
            ]
        )
        terms = np.concatenate([t for _, t, _ in keep])
        logw = saturate_array(round_like_embedded(np.concatenate([w for _, _, w in keep]))).astype(np.float32)
        del keep
        csc = sp.csc_matrix((logw, (rows, terms)), shape=(args.docs, args.vocab))
        del rows, terms, logw

    index.warmup()
    for q in queries[:5]:  # warm up: page cache
        index.search(q)
        if csc is not None:
            scipy_topk(csc, q, 10)
    ours, theirs, agree = [], [], 0
    for q in queries:
        t = time.perf_counter()
        hits = index.search(q, k=10)
        ours.append(time.perf_counter() - t)
        if csc is not None:
            t = time.perf_counter()
            top = scipy_topk(csc, q, 10)
            theirs.append(time.perf_counter() - t)
            agree += {h.id for h in hits} == {ids[i] for i in top}
    ours_a = np.array(ours) * 1e3
    report = {
        "docs": stats["documents"],
        "terms_per_doc": round(stats["postings"] / stats["documents"], 1),
        "postings": stats["postings"],
        "bytes_per_term": round(stats["bytes_per_posting"], 3),
        "generate_s": round(gen_s, 1),
        "build_s": round(build_s, 1),
        "embedded_p50_ms": round(float(np.median(ours_a)), 3),
        "embedded_p99_ms": round(float(np.percentile(ours_a, 99)), 3),
        "embedded_qps": round(len(ours) / (ours_a.sum() / 1e3), 1),
    }
    if theirs:
        theirs_a = np.array(theirs) * 1e3
        report |= {
            "scipy_p50_ms": round(float(np.median(theirs_a)), 3),
            "scipy_qps": round(len(theirs) / (theirs_a.sum() / 1e3), 1),
            "speedup_vs_scipy_p50": round(float(np.median(theirs_a) / np.median(ours_a)), 2),
            "top10_set_agreement": agree / len(queries),
        }
    print(json.dumps(report, indent=1))  # noqa: T201 - a benchmark prints its figures


if __name__ == "__main__":
    main()
