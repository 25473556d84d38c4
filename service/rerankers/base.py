"""What a reranker is (``registry.RERANKERS`` lists them, one module each).

Kept apart from the search pipeline so that a reranker module needs nothing of the service: the
pipeline hands it the query as a ``RerankQuery`` (its ``service.search.WeightedQuery`` is one).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from vsparta.termindex import Hit


class RerankQuery(Protocol):
    """What a reranker may read of the query: the weights sent, the tokens, the weighting's name."""

    @property
    def weights(self) -> Mapping[int, float]: ...

    @property
    def tokens(self) -> Sequence[str]: ...

    @property
    def weighting(self) -> str: ...


class Reranker(Protocol):
    """Re-orders the first ``candidates(k)`` hits and keeps at most ``k`` (best first). The hits carry
    their matched tokens (``Hit.contributions``); a hit's score stays the engine's, so its
    explanation still adds up to it."""

    name: str
    description: str  # one sentence: GET /search/options, the page

    def candidates(self, k: int) -> int: ...

    async def rerank(self, query: RerankQuery, hits: list[Hit], k: int) -> list[Hit]: ...
