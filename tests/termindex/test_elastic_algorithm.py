"""The search algorithm is chosen from the index's documents: block-max WAND for a sparse model's
short documents, scoring every match for ~1,000-term ones; both give the oracle's top k."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from elastic_testkit import fresh_index

from vsparta.termindex.base import TermDocument
from vsparta.termindex.elastic.common import WAND_MAX_MEAN_TERMS
from vsparta.termindex.elastic.index import AsyncElasticsearchIndex, ElasticsearchIndex
from vsparta.termindex.oracle import BruteForceOracle, round_like_elasticsearch

pytestmark = pytest.mark.elasticsearch


def _docs(n: int, terms: int, seed: int) -> list[TermDocument]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        ids = rng.choice(2000, terms, replace=False)
        w = rng.lognormal(-1.0, 1.0, terms)
        out.append(TermDocument(id=f"d{i:04d}", weights=dict(zip(ids.tolist(), w.tolist(), strict=True))))
    return out


@pytest.mark.parametrize(("terms", "wand"), [(30, True), (WAND_MAX_MEAN_TERMS + 100, False)])
def test_the_algorithm_follows_document_length(es_url: str, terms: int, wand: bool) -> None:
    docs = _docs(300, terms, seed=terms)
    oracle = BruteForceOracle(docs, round_weights=round_like_elasticsearch)
    with fresh_index(es_url, f"algo-{terms}") as index:
        assert index.track_total_hits is None
        assert index.search({1: 1.0}) == []  # empty: nothing to choose from yet, and no error
        assert index.track_total_hits is None
        index.upsert(docs)
        query = {int(t): 1.0 for t in list(docs[0].weights)[:8]}
        hits = index.search(query, k=10)
        assert index.track_total_hits is (not wand)
        assert [h.id for h in hits] == [h.id for h in oracle.search(query, k=10)]

        async def run() -> bool | None:
            engine = AsyncElasticsearchIndex(es_url, index.alias)
            try:
                assert [h.id for h in await engine.search(query, k=10)] == [h.id for h in hits]
                return engine.track_total_hits
            finally:
                await engine.close()

        assert asyncio.run(run()) is (not wand)
        forced = ElasticsearchIndex(es_url, index.alias, track_total_hits=wand is False)
        try:
            assert forced.track_total_hits is (wand is False)
            assert [h.id for h in forced.search(query, k=10)] == [h.id for h in hits]
        finally:
            forced.close()
