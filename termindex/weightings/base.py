"""What a query weighting is (``registry.WEIGHTINGS`` lists them, one module each)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

# (counts, df or None, n_docs) -> weights, arrays aligned on the query's distinct tokens.
Weigh = Callable[[np.ndarray, np.ndarray | None, int], np.ndarray]


@dataclass(frozen=True)
class QueryWeighting:
    """A named rule from a text query's token counts to the weights (clause boosts) searched with.

    ``weigh`` works on aligned arrays, so the service (one query) and the evaluation (every
    query's tokens at once) run the same rule; it must keep every weight finite and in
    (0, ``termindex.base.MAX_QUERY_WEIGHT``]. With ``statistics`` it gets the index's document
    frequencies of those tokens and its document count (``TermIndex.term_statistics``); without,
    ``None`` and 0.
    """

    name: str
    description: str  # one sentence: --help, the page's options, the OpenAPI document
    weigh: Weigh
    statistics: bool = False
