"""``coord``: Lucene's classic coordination factor, as a re-ranking of the engine's first hits.

Lucene's ``ClassicSimilarity`` multiplied a document's score by ``coord = overlap / maxOverlap``,
the share of the query's terms the document matches, so a document that matches every word of
"a banana next to a cupcake" goes above one that matches "banana" very strongly and nothing
else. VisualSparta's sum (paper Eq. 15) has no such factor. Here the first ``DEPTH`` x k hits are
put in the order of score x coord (ties keep the engine's order) and the first k kept; each hit's
score stays the engine's, so its explanation still adds up to it.
"""

from __future__ import annotations

from vsparta.service.rerankers.base import RerankQuery
from vsparta.termindex import Hit

DEPTH = 3  # candidates per result asked of the engine


def coordination(hit: Hit, query: RerankQuery) -> float:
    """The share of the query's distinct tokens that ``hit`` matches (its ``contributions``)."""
    if not query.weights:
        return 0.0
    matched = sum(1 for t in hit.contributions or {} if t in query.weights)
    return matched / len(query.weights)


class Coordination:
    """A ``rerankers.base.Reranker``: score x coord over the first ``DEPTH`` x k hits."""

    name = "coord"
    description = (
        f"re-orders the first {DEPTH} x k hits by score x the share of the query's words each matches "
        "(Lucene's classic coordination factor); scores stay the engine's"
    )

    def candidates(self, k: int) -> int:
        return DEPTH * k

    async def rerank(self, query: RerankQuery, hits: list[Hit], k: int) -> list[Hit]:
        keyed = [(-h.score * coordination(h, query), rank, h) for rank, h in enumerate(hits)]
        return [h for _, _, h in sorted(keyed, key=lambda x: (x[0], x[1]))][:k]


RERANKER = Coordination()
