"""The OpenSearch engine's own parts, on real nodes: its spec, the product check turned around
(each engine refuses the other's server in one sentence), and the same answers and explanation
output as Elasticsearch on the same documents, through the sync engine and the service's reader.
The shared protocol (parity, versions, node loss) is tested by the Elasticsearch tests, which run
on each engine line (``search_server``)."""

from __future__ import annotations

import asyncio

import pytest
from elastic_testkit import SearchServer, free_port, fresh_index, random_docs, random_queries, unique_name

from vsparta.termindex import open_index, parse_spec
from vsparta.termindex.errors import EngineUnavailable, IndexNotFound
from vsparta.termindex.opensearch.index import AsyncOpenSearchIndex, OpenSearchIndex
from vsparta.termindex.registry import engine_of

pytestmark = pytest.mark.elasticsearch


def test_spec_names_the_engine() -> None:
    spec = parse_spec("opensearch+https://search.example:9200/images")
    assert tuple(spec) == ("opensearch", "https://search.example:9200", "images")
    assert engine_of(spec).label == "OpenSearch" and engine_of(spec).versions
    with pytest.raises(ValueError, match="OpenSearch spec must be opensearch\\+http://HOST:PORT/INDEX"):
        parse_spec("opensearch+http://host:9200")
    with pytest.raises(ValueError, match="or opensearch\\+http://HOST:PORT/INDEX$"):
        parse_spec("opensearch+ftp://host:9200/images")  # no engine claims that scheme


def test_each_engine_refuses_the_other_server_in_one_sentence(es_url: str, os_url: str) -> None:
    with pytest.raises(EngineUnavailable) as wrong:
        open_index(f"opensearch+{es_url}/anything").count()
    assert str(wrong.value).startswith("the backend is Elasticsearch 7.17")
    assert "not OpenSearch" in str(wrong.value) and "\n" not in str(wrong.value)
    with pytest.raises(EngineUnavailable, match="not an Elasticsearch 7.x server") as other:
        open_index(f"{os_url}/anything").count()
    assert "opensearch+http://" in str(other.value)


def test_errors_name_opensearch(os_url: str) -> None:
    """OpenSearch speaks through Elasticsearch's client and its exceptions; its user must still read
    "OpenSearch" in what went wrong (the service's 503 detail and the CLI's sentence carry it)."""
    nowhere = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    with pytest.raises(EngineUnavailable, match="^OpenSearch is not reachable \\(open\\)"):
        open_index(f"opensearch+{nowhere}/anything")

    async def search_nowhere() -> None:
        reader = AsyncOpenSearchIndex(nowhere, "anything")
        try:
            await reader.search({5: 1.0}, k=3)
        finally:
            await reader.close()

    with pytest.raises(EngineUnavailable, match="^OpenSearch is not reachable"):
        asyncio.run(search_nowhere())
    missing = unique_name("missing")
    with pytest.raises(IndexNotFound, match="^no OpenSearch index or alias") as absent:
        open_index(f"opensearch+{os_url}/{missing}")
    assert f"--backend opensearch+{os_url}/{missing}`" in str(absent.value)


def test_same_answers_and_explanations_as_elasticsearch(es_url: str, os_url: str) -> None:
    """Same documents into both engines: ids, scores and per-term contributions are identical."""
    docs = random_docs(400, 300, seed=21)
    es_server, os_server = SearchServer("elasticsearch", es_url), SearchServer("opensearch", os_url)
    with fresh_index(es_server, "same") as es, fresh_index(os_server, "same") as os_index:
        assert isinstance(os_index, OpenSearchIndex)
        for index in (es, os_index):
            with index.bulk_load():
                index.upsert(docs)
            index.finish_load()
        for q in random_queries(40, 300, seed=22):
            want = es.search(q, k=10, explain=True)
            got = os_index.search(q, k=10, explain=True)
            assert [(h.id, h.score, h.contributions, h.metadata) for h in got] == [
                (h.id, h.score, h.contributions, h.metadata) for h in want
            ]
        assert os_index.get(docs[5].id) == es.get(docs[5].id)
        similar = [h.id for h in os_index.similar(docs[5].id, k=5)]
        assert similar == [h.id for h in es.similar(docs[5].id, k=5)]
        query = random_queries(1, 300, seed=23)[0]
        expected = [(h.id, h.score) for h in os_index.search(query, k=10)]

        async def read() -> list[tuple[str, float]]:
            reader = AsyncOpenSearchIndex(os_url, os_index.alias)
            try:
                return [(h.id, h.score) for h in await reader.search(query, k=10)]
            finally:
                await reader.close()

        assert asyncio.run(read()) == expected
