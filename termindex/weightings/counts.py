"""``counts``, the paper's rule (Eq. 15) and the default: a token weighs how often the query has it."""

from __future__ import annotations

import numpy as np

from vsparta.termindex.weightings.base import QueryWeighting


def _counts(counts: np.ndarray, df: np.ndarray | None, n_docs: int) -> np.ndarray:
    return np.asarray(counts, dtype=np.float64)


WEIGHTING = QueryWeighting(
    "counts",
    "how often each token occurs in the query (the paper's rule)",
    _counts,
)
