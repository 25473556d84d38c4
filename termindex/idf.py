"""Query-side term weights from the index's own statistics: the one home of the IDF rule.

A text query's tokens all count alike under the paper's rule (weight = how often the token occurs),
so a word that every image has ("a", "the", "of") adds to every score as much as a rare, telling
word. OpenSearch's inference-free neural sparse mode (the ``opensearch-neural-sparse-encoding-doc``
models, Geng et al. 2024, arXiv:2411.04403) instead weights each query token by its inverse
document frequency (``idf.json`` shipped with the model, computed on its training corpus). Here
the frequencies come from the index being searched, so nothing but the index is needed at query
time and the weights follow the collection:

    weight(t) = count(t in query) * idf(t),   idf(t) = ln(1 + (N - df_t + 0.5) / (df_t + 0.5))

with N the documents of the index and df_t those that hold t. That ``idf`` is Lucene's BM25 one
(``BM25Similarity.idf``; Robertson-Sparck Jones with the ``1 +`` that keeps it positive): a term in
every document still weighs a little more than 0 (every engine refuses weights <= 0), an absent
term weighs most (it matches nothing, so that costs nothing). SPLADE's document-only variant
(SPLADE-doc, Formal et al. 2021, "SPLADE v2", arXiv:2109.10086) scores a query as its bag of
tokens, each weighing 1: our default (``counts``); the IDF is what the OpenSearch work adds to it.

Each weight is rounded to float32 here, once: Elasticsearch and OpenSearch keep a clause's
``boost`` as a float32, so the weight the engine multiplies with is exactly the one the
explanation multiplies with, and the embedded engine (float64 boosts) sees the same number.

The weighting named ``idf`` (``termindex.weightings.idf``) is this rule. Statistics per engine:
``TermIndex.term_statistics`` (the embedded engine counts its postings;
Elasticsearch/OpenSearch count matches in one ``_msearch``, cached per index version by
``StatisticsCache``).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from vsparta.termindex.base import MAX_QUERY_WEIGHT, TermStatistics


def idf_array(df: Any, n_docs: int) -> np.ndarray:
    """BM25's inverse document frequency (module docstring), float64; ``df`` clamped to [0, n_docs]."""
    n = float(max(int(n_docs), 0))
    d = np.clip(np.asarray(df, dtype=np.float64), 0.0, n)
    return np.log1p((n - d + 0.5) / (d + 0.5))


def weigh_counts(counts: Any, df: Any, n_docs: int) -> np.ndarray:
    """``count * idf`` of aligned arrays, as float32 in (0, ``MAX_QUERY_WEIGHT``]: the query weights
    (the service's and the evaluation's, so both rank alike)."""
    w = (np.asarray(counts, dtype=np.float64) * idf_array(df, n_docs)).astype(np.float32)
    return np.clip(w, np.finfo(np.float32).tiny, np.float32(MAX_QUERY_WEIGHT))


def idf_weights(counts: Mapping[int, float], stats: TermStatistics) -> dict[int, float]:
    """``{id: count * idf}`` of a query's token counts (``weigh_counts``), from ``stats``."""
    ids = list(counts)
    df = [stats.df.get(t, 0) for t in ids]
    weights = weigh_counts([counts[t] for t in ids], df, stats.n_docs)
    return dict(zip(ids, weights.astype(np.float64).tolist(), strict=True))


class StatisticsCache:
    """Document frequencies of one index version, at most ``max_terms`` terms (least recently used
    go first), each at most ``max_age_s`` old (documents written into the same version move them).

    A new ``version`` (the alias moved to a rebuilt index) empties it. One per engine handle; a
    lock keeps it whole when a synchronous handle is shared by threads.
    """

    def __init__(
        self, max_terms: int = 65_536, max_age_s: float = 60.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if max_terms < 1 or max_age_s <= 0:
            raise ValueError("max_terms must be >= 1 and max_age_s > 0")
        self.max_terms = max_terms
        self.max_age_s = max_age_s
        self._clock = clock
        self.version: str | None = None
        self.n_docs = 0
        self._df: OrderedDict[int, tuple[int, float]] = OrderedDict()  # term -> (df, when)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._df)

    def clear(self) -> None:
        with self._lock:
            self._clear()

    def _clear(self) -> None:
        self.version = None
        self.n_docs = 0
        self._df.clear()

    def seen_version(self, version: str) -> None:
        """A search answered from ``version``: forget everything if it is not the cached one."""
        with self._lock:
            if self.version is not None and version != self.version:
                self._clear()

    def missing(self, ids: Iterable[int]) -> list[int]:
        """The ids to ask the engine for (absent or too old), ascending."""
        now = self._clock()
        with self._lock:
            return [
                t
                for t in sorted(set(ids))
                if (entry := self._df.get(t)) is None or now - entry[1] > self.max_age_s
            ]

    def store(self, version: str, n_docs: int, df: Mapping[int, int]) -> None:
        """Fresh counts from ``version`` (which empties the cache when it is a new one)."""
        now = self._clock()
        with self._lock:
            if version != self.version:
                self._clear()
                self.version = version
            self.n_docs = int(n_docs)
            for t, d in df.items():
                self._df[t] = (int(d), now)
                self._df.move_to_end(t)
            while len(self._df) > self.max_terms:
                self._df.popitem(last=False)

    def statistics(self, ids: Iterable[int]) -> TermStatistics:
        """The cached numbers for ``ids`` (call ``missing`` and ``store`` first)."""
        df = {}
        with self._lock:
            for t in set(ids):
                entry = self._df.get(t)
                if entry is not None:
                    df[t] = entry[0]
                    self._df.move_to_end(t)
            return TermStatistics(self.n_docs, df, self.version or "")
