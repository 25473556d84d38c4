"""Brute-force scoring every engine is checked against, and the weight roundings engines apply.

Engines do not store weights exactly: Elasticsearch keeps 9 significant bits of a feature value,
the embedded engine keeps an IEEE half float (11 significant bits). Each rule lives with its
engine (``vsparta.termindex.elastic.text``, ``vsparta.termindex.embedded.weights``) and is
re-exported here. A parity test therefore builds the oracle on the *rounded* weights
(``round_weights=round_like_...``) and then expects identical top-k ids and scores, instead of
loosening the comparison until it passes.

Scores are summed in float64, term by term in ascending vocabulary id, the same order the
embedded engine uses when it rescores its candidates, so the two agree bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import numpy as np

from vsparta.termindex.base import Hit, TermDocument, validate_weights
from vsparta.termindex.elastic.text import round_like_elasticsearch
from vsparta.termindex.embedded.weights import FLOAT16_MAX, FLOAT16_MIN_POSITIVE, round_like_embedded
from vsparta.termindex.scoring import saturate_array

__all__ = [
    "FLOAT16_MAX",
    "FLOAT16_MIN_POSITIVE",
    "BruteForceOracle",
    "random_documents",
    "random_queries",
    "round_like_elasticsearch",
    "round_like_embedded",
]

RoundFn = Callable[[np.ndarray], np.ndarray]


def _sort_hits(ids: list[str], scores: np.ndarray, k: int) -> list[tuple[str, float]]:
    """Top-k (id, score) by score descending, ties by id ascending."""
    order = sorted(range(len(ids)), key=lambda i: (-scores[i], ids[i]))
    return [(ids[i], float(scores[i])) for i in order[:k]]


class BruteForceOracle:
    """Exhaustive exact scoring over a sparse doc x term matrix (fine up to ~1M small docs).

    ``round_weights`` (e.g. ``round_like_embedded``) is applied to every stored weight first, so
    the oracle sees exactly what the engine stores.
    """

    def __init__(self, docs: Iterable[TermDocument], round_weights: RoundFn | None = None) -> None:
        import scipy.sparse as sp  # tests and benchmarks only: the engines import this module

        self.ids: list[str] = []
        self.metadata: list[Mapping] = []
        rows: list[np.ndarray] = []
        cols: list[np.ndarray] = []
        vals: list[np.ndarray] = []
        latest: dict[str, TermDocument] = {}
        for doc in docs:  # a later document with the same id replaces the earlier one
            latest[doc.id] = doc
        for row, doc in enumerate(latest.values()):
            self.ids.append(doc.id)
            self.metadata.append(doc.metadata)
            t = np.fromiter(doc.weights.keys(), dtype=np.int64, count=len(doc.weights))
            w = np.fromiter(doc.weights.values(), dtype=np.float64, count=len(doc.weights))
            rows.append(np.full(len(t), row, dtype=np.int64))
            cols.append(t)
            vals.append(w)
        r = np.concatenate(rows) if rows else np.zeros(0, np.int64)
        c = np.concatenate(cols) if cols else np.zeros(0, np.int64)
        v = np.concatenate(vals) if vals else np.zeros(0, np.float64)
        if round_weights is not None and len(v):
            v = np.asarray(round_weights(v), dtype=np.float64)
        n_terms = int(c.max()) + 1 if len(c) else 1
        self.matrix = sp.csc_matrix((v, (r, c)), shape=(len(self.ids), n_terms))
        self.matrix.sum_duplicates()

    def scores(self, query: Mapping[int, float]) -> tuple[np.ndarray, np.ndarray]:
        """(score per document, matched-any-term mask), summed in ascending term id order."""
        q = validate_weights(query, what="query")
        n = len(self.ids)
        acc = np.zeros(n, dtype=np.float64)
        matched = np.zeros(n, dtype=bool)
        for t in sorted(q):
            if t >= self.matrix.shape[1]:
                continue
            col = self.matrix.getcol(t)
            w = np.zeros(n, dtype=np.float64)
            w[col.indices] = col.data
            acc += float(q[t]) * saturate_array(w)
            matched[col.indices] = True
        return acc, matched

    def search(self, query: Mapping[int, float], k: int = 10) -> list[Hit]:
        """Exact top-k of documents matching at least one query term."""
        acc, matched = self.scores(query)
        idx = np.flatnonzero(matched)
        if k < len(idx):  # keep everything tied with the k-th score, then sort exactly
            kth = np.partition(acc[idx], len(idx) - k)[len(idx) - k]
            idx = idx[acc[idx] >= kth]
        top = _sort_hits([self.ids[i] for i in idx], acc[idx], k)
        pos = {self.ids[i]: i for i in idx}
        return [Hit(id=i, score=s, metadata=self.metadata[pos[i]]) for i, s in top]


def _term_order(vocab_size: int) -> np.ndarray:
    """Rank -> term id, fixed per vocabulary size: frequent terms are not simply the small ids."""
    return np.random.default_rng(12345).permutation(vocab_size)


def random_documents(
    n: int,
    *,
    vocab_size: int = 2000,
    terms_per_doc: tuple[int, int] = (5, 80),
    zipf: float = 1.1,
    duplicates: float = 0.05,
    seed: int = 0,
    id_prefix: str = "doc",
) -> list[TermDocument]:
    """Random weighted-term documents for parity tests: Zipf-ish document frequencies.

    A fraction ``duplicates`` of documents copies an earlier document's terms exactly under a
    new id, so exact score ties occur by construction and the id tie-break is exercised.
    """
    rng = np.random.default_rng(seed)
    ranks = np.arange(1, vocab_size + 1, dtype=np.float64)
    p = ranks**-zipf
    p /= p.sum()
    perm = _term_order(vocab_size)
    docs: list[TermDocument] = []
    for i in range(n):
        if docs and rng.random() < duplicates:
            src = docs[int(rng.integers(len(docs)))]
            docs.append(TermDocument(f"{id_prefix}{i}", dict(src.weights), {"copy_of": src.id}))
            continue
        m = int(rng.integers(terms_per_doc[0], terms_per_doc[1] + 1))
        terms = np.unique(perm[rng.choice(vocab_size, size=m, p=p)])
        weights = rng.lognormal(mean=0.0, sigma=1.0, size=len(terms)) * 0.5
        docs.append(
            TermDocument(
                f"{id_prefix}{i}",
                {int(t): float(w) for t, w in zip(terms, weights, strict=True)},
                {"n": i},
            )
        )
    return docs


def random_queries(
    n: int, *, vocab_size: int = 2000, tokens: tuple[int, int] = (1, 12), zipf: float = 1.1, seed: int = 1
) -> list[dict[int, float]]:
    """Caption-like queries: skewed tokens, a repeated token counts twice, some explicit weights."""
    rng = np.random.default_rng(seed)
    ranks = np.arange(1, vocab_size + 1, dtype=np.float64)
    p = ranks**-zipf
    p /= p.sum()
    perm = _term_order(vocab_size)  # the same frequent terms as random_documents
    out = []
    for _ in range(n):
        m = int(rng.integers(tokens[0], tokens[1] + 1))
        q: dict[int, float] = {}
        for t in perm[rng.choice(vocab_size, size=m, p=p)]:
            q[int(t)] = q.get(int(t), 0.0) + 1.0
        if rng.random() < 0.2:  # explicit {token: weight} queries
            q = {t: float(b * rng.uniform(0.1, 3.0)) for t, b in q.items()}
        out.append(q)
    return out
