"""``idf``: count x the token's inverse document frequency in the index searched (``termindex.scoring``)."""

from __future__ import annotations

import numpy as np

from vsparta.termindex.scoring import weigh_counts
from vsparta.termindex.weightings.base import QueryWeighting


def _idf(counts: np.ndarray, df: np.ndarray | None, n_docs: int) -> np.ndarray:
    if df is None:
        raise ValueError("idf weights need the index's term statistics")
    return weigh_counts(counts, df, n_docs)


WEIGHTING = QueryWeighting(
    "idf",
    "count x the token's inverse document frequency in the index, ln(1 + (N - df + 0.5) / (df + 0.5)), "
    "so words most images have, such as 'a', weigh little",
    _idf,
    statistics=True,
)
