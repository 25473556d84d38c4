"""The async read side (service) returns exactly what the sync engine returns."""

from __future__ import annotations

import asyncio

import pytest
from elastic_testkit import free_port, fresh_index, random_docs, random_queries, unique_name

from vsparta.termindex.base import similar_query, without_self
from vsparta.termindex.elastic.index import AsyncElasticsearchIndex
from vsparta.termindex.errors import DocumentNotFound, EngineUnavailable, IndexNotFound, InvalidQuery
from vsparta.termindex.oracle import round_like_elasticsearch

pytestmark = pytest.mark.elasticsearch


def test_async_matches_sync(es_url: str) -> None:
    docs = random_docs(300, 200, seed=3)
    with fresh_index(es_url, "async") as index:
        index.upsert(docs)
        queries = random_queries(20, 200, seed=4)
        expected = [index.search(q, k=7, explain=True) for q in queries]
        expected_similar = index.similar(docs[5].id, k=4)

        async def run() -> None:
            engine = AsyncElasticsearchIndex(es_url, index.alias, request_timeout=5)
            try:
                assert await engine.ping() and await engine.ready()
                assert await engine.count() == len(docs)
                got = await asyncio.gather(*(engine.search(q, k=7, explain=True) for q in queries))
                assert got == expected
                # more like this on the reader: the document, then a search for k + 1 without it
                source = await engine.get(docs[5].id)
                hits = await engine.search(similar_query(source, 32), k=5, explain=False)
                assert without_self(hits, source.id, 4) == expected_similar
                doc = await engine.get(docs[9].id)
                kept = {t: float(round_like_elasticsearch(w)) for t, w in docs[9].weights.items()}
                assert doc.weights == kept and doc.metadata == docs[9].metadata
                with pytest.raises(DocumentNotFound):
                    await engine.get("nope")
                with pytest.raises(InvalidQuery):
                    await engine.search({})
            finally:
                await engine.close()

        asyncio.run(run())


def test_async_errors(es_url: str) -> None:
    async def run() -> None:
        missing = AsyncElasticsearchIndex(es_url, unique_name("missing"))
        down = AsyncElasticsearchIndex(f"http://127.0.0.1:{free_port()}", "x")
        try:
            assert await missing.ping() and not await missing.ready()
            with pytest.raises(IndexNotFound):
                await missing.search({1: 1.0})
            with pytest.raises(IndexNotFound):
                await missing.count()
            assert not await down.ping() and not await down.ready()
            with pytest.raises(EngineUnavailable):
                await down.search({1: 1.0})
        finally:
            await missing.close()
            await down.close()

    asyncio.run(run())
