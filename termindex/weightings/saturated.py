"""``saturated``: BM25's term-frequency saturation applied to the query's counts.

BM25 (Robertson et al., TREC-3) weighs a term that occurs ``c`` times as ``(k1 + 1) c / (k1 + c)``:
1 for one occurrence, rising towards ``k1 + 1`` however often it repeats. Under ``counts`` a caption
such as "a banana next to a cupcake" weighs "a" twice as much as "banana"; saturated, 1.375 times.
No statistics are needed. ``k1`` = 1.2, Lucene's default; weights rounded to float32 once, as
``idf``'s are, so Elasticsearch's clause boost and the explanation multiply by the same number.
"""

from __future__ import annotations

import numpy as np

from vsparta.termindex.weightings.base import QueryWeighting

K1 = 1.2


def saturate_counts(counts: np.ndarray, k1: float = K1) -> np.ndarray:
    """``(k1 + 1) c / (k1 + c)`` as float32 (exactly 1 for a single occurrence)."""
    c = np.asarray(counts, dtype=np.float64)
    return ((k1 + 1.0) * c / (k1 + c)).astype(np.float32)


def _saturated(counts: np.ndarray, df: np.ndarray | None, n_docs: int) -> np.ndarray:
    return saturate_counts(counts)


WEIGHTING = QueryWeighting(
    "saturated",
    f"BM25's saturation of each token's count, ({K1:g} + 1) c / ({K1:g} + c): a repeated word such as "
    "'a' weighs less than its count",
    _saturated,
)
