"""Exhaustive scoring with scipy: the issue's reference engine and the oracle every engine is checked against.

``score(q, d) = sum_t boost_t * saturate(w_td)`` (``termindex.scoring``): precompute ``saturate(w)``
once into a CSC matrix (images x vocabulary), take the query's columns, multiply by the boosts,
and keep the top k with ``argpartition``. Ties are broken by row ascending (= id ascending),
like ``TermIndex.search``.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from vsparta.bench.corpus import Corpus, Query
from vsparta.bench.invert import invert
from vsparta.termindex.scoring import saturate, saturate_array

# Relative slack when deciding whether a returned image "is" in the exact top-k: float32 sums of
# ~10 terms differ by ~1e-7 relative between engines; quantizing engines differ far more.
TIE_TOLERANCE = 1e-5


def build_matrix(corpus: Corpus) -> sp.csc_matrix:
    """[n_docs, vocab] float32 saturate(weights), column-compressed (one column = one posting list).

    Built with ``invert`` (8 bytes per posting, no second copy) so 1M x 1000 fits in ~8 GB.
    """
    indptr, rows, data = invert(corpus, saturate_array, np.float32)
    index_dtype = np.int32 if corpus.nnz < 2**31 else np.int64
    return sp.csc_matrix(
        (data, rows, indptr.astype(index_dtype)), shape=(corpus.n_docs, corpus.vocab_size), copy=False
    )


def query_vector(query: Query) -> tuple[np.ndarray, np.ndarray]:
    cols = np.fromiter(query.keys(), dtype=np.int64, count=len(query))
    boosts = np.fromiter(query.values(), dtype=np.float32, count=len(query))
    return cols, boosts


def scores(matrix: sp.csc_matrix, query: Query) -> np.ndarray:
    """Score of every image for one query, float32 [n_docs]."""
    cols, boosts = query_vector(query)
    return matrix[:, cols] @ boosts


def top_k(scores_: np.ndarray, k: int) -> np.ndarray:
    """Rows of the k best positive scores, best first, ties by row ascending.

    When most scores are 0 (few terms per image), selection runs over the positive ones only:
    numpy's introselect over that many equal values costs milliseconds. A 1/64 sample decides,
    so the common dense case pays ~10 us, not another full pass.
    """
    sample = scores_[::64]
    if np.count_nonzero(sample) * 2 < len(sample):
        cand = np.flatnonzero(scores_ > 0)
        if len(cand) > k:
            vals = scores_[cand]
            cand = cand[vals >= vals[np.argpartition(vals, len(vals) - k)[len(vals) - k]]]
    elif len(scores_) > k:
        kth = scores_[np.argpartition(scores_, len(scores_) - k)[len(scores_) - k]]
        cand = np.flatnonzero(scores_ >= kth)  # every tie at the boundary, so row order decides
    else:
        cand = np.arange(len(scores_))
    cand = cand[scores_[cand] > 0]
    order = np.lexsort((cand, -scores_[cand]))[:k]
    return cand[order]


def brute_force_top_k(corpus: Corpus, query: Query, k: int) -> list[int]:
    """Pure-Python loop over every image (tests only: the oracle's oracle)."""
    scored = []
    for i in range(corpus.n_docs):
        idx, w = corpus.row(i)
        terms = dict(zip(idx.tolist(), w.tolist(), strict=True))
        s = sum(b * saturate(terms[t]) for t, b in query.items() if t in terms)
        if s > 0:
            scored.append((-s, i))
    scored.sort()
    return [i for _, i in scored[:k]]


def agreement(returned: list[int], exact_scores: np.ndarray, k: int) -> float:
    """Share of the exact top-k found, counting any image scoring as well as the k-th (ties).

    ``exact_scores`` are the oracle's scores of every image for this query.
    """
    best = top_k(exact_scores, k)
    if len(best) == 0:
        return 1.0 if not returned else 0.0
    kth = float(exact_scores[best[-1]])
    threshold = kth - TIE_TOLERANCE * abs(kth)
    found = {r for r in returned[:k] if 0 <= r < len(exact_scores) and exact_scores[r] >= threshold}
    return min(len(found), len(best)) / len(best)


class StreamingOracle:
    """Exact top-k scores for every query without holding the index: rows are scored in chunks.

    Each chunk of images (CSR, float64 saturated weights) is multiplied by the sparse
    ``vocabulary x queries`` boost matrix and only the k best scores per query are kept, so memory
    is bounded by the chunk whatever the corpus size (1M x 1000 terms included). Agreement only
    needs the k-th best score and the exact score of the images an engine returns.
    """

    def __init__(self, corpus: Corpus, queries: list[Query], k: int, chunk: int = 20_000) -> None:
        self.corpus, self.queries, self.k = corpus, queries, k
        terms, cols, boosts = [], [], []
        for qi, q in enumerate(queries):
            for t, b in q.items():
                terms.append(t)
                cols.append(qi)
                boosts.append(b)
        qmat = sp.csr_matrix(
            (boosts, (terms, cols)), shape=(corpus.vocab_size, len(queries)), dtype=np.float64
        )
        best = np.zeros((0, len(queries)))
        for start, stop in corpus.chunks(chunk):
            a, b = int(corpus.indptr[start]), int(corpus.indptr[stop])
            block = sp.csr_matrix(
                (
                    saturate_array(np.asarray(corpus.weights[a:b], dtype=np.float64)),
                    np.asarray(corpus.indices[a:b], dtype=np.int32),
                    np.asarray(corpus.indptr[start : stop + 1]) - a,
                ),
                shape=(stop - start, corpus.vocab_size),
            )
            s = (block @ qmat).toarray()  # [rows, queries]
            both = np.vstack([best, s])
            keep = min(k, len(both))
            best = -np.partition(-both, keep - 1, axis=0)[:keep]
        best.sort(axis=0)
        self.best = best[::-1]  # [k, queries], descending per query

    def n_best(self, qi: int) -> int:
        return int((self.best[:, qi] > 0).sum())

    def kth(self, qi: int) -> float:
        n = self.n_best(qi)
        return float(self.best[n - 1, qi]) if n else 0.0

    def score_of(self, qi: int, row: int) -> float:
        idx, w = self.corpus.row(row)
        q = self.queries[qi]
        hit = np.isin(idx, np.fromiter(q.keys(), dtype=np.int64, count=len(q)))
        return float(sum(q[int(t)] * saturate(float(x)) for t, x in zip(idx[hit], w[hit], strict=True)))

    def agreement(self, qi: int, returned: list[int]) -> float:
        """Share of the exact top-k found; any image scoring as well as the k-th counts (ties)."""
        n = self.n_best(qi)
        if n == 0:
            return 1.0 if not returned else 0.0
        kth = self.kth(qi)
        threshold = kth - TIE_TOLERANCE * abs(kth)
        found = {
            r for r in returned[: self.k] if 0 <= r < self.corpus.n_docs and self.score_of(qi, r) >= threshold
        }
        return min(len(found), n) / n
