"""Elasticsearch's own bad input (ids too long in UTF-8 bytes, weights outside float32's normal
range, documents without terms), a missing index and an unreachable node give clear termindex
errors. What every engine refuses is in the conformance suite (``test_engine_conformance_writes.py``)."""

from __future__ import annotations

import time

import pytest
from elastic_testkit import FaultProxy, free_port, fresh_index, unique_name

from vsparta.termindex import open_index
from vsparta.termindex.base import TermDocument
from vsparta.termindex.elastic.common import MAX_ID_BYTES
from vsparta.termindex.elastic.index import ElasticsearchIndex
from vsparta.termindex.elastic.translate import errors
from vsparta.termindex.errors import (
    EngineUnavailable,
    IndexNotFound,
    InvalidDocument,
    InvalidQuery,
)

pytestmark = pytest.mark.elasticsearch


@pytest.fixture(scope="module")
def index(es_url: str):
    with fresh_index(es_url, "errors") as idx:
        idx.upsert([TermDocument("base", {1: 1.0, 2: 2.0}, {"image": "x.jpg"})])
        yield idx


@pytest.mark.parametrize(
    "doc, match",
    [
        (TermDocument("é" * (MAX_ID_BYTES // 2 + 1), {1: 1.0}), f"{MAX_ID_BYTES} bytes"),
        (TermDocument("tiny", {1: 1e-39}), "float32 normal range"),
        (TermDocument("huge", {1: 1e39}), "float32 normal range"),
        (TermDocument("empty", {}), "empty"),
    ],
)
def test_invalid_documents_are_rejected_before_sending(
    index: ElasticsearchIndex, doc: TermDocument, match: str
) -> None:
    with pytest.raises(InvalidDocument, match=match):
        index.upsert([doc])
    assert index.count() == 1


def test_missing_index(es_url: str) -> None:
    name = unique_name("missing")
    with pytest.raises(IndexNotFound, match=name):
        ElasticsearchIndex(es_url, name)
    with pytest.raises(IndexNotFound):
        open_index(f"{es_url}/{name}")


def test_bad_index_names_and_options(es_url: str) -> None:
    for bad in ("UPPER", "with space", "a/b", "*", "-lead"):
        with pytest.raises(ValueError, match="index name"):
            ElasticsearchIndex(es_url, bad)
    with pytest.raises(ValueError, match="unknown Elasticsearch options"):
        ElasticsearchIndex(es_url, "x", create=True, chunk_sise=3)
    with pytest.raises(ValueError, match="request_timeout"):
        ElasticsearchIndex(es_url, "x", request_timeout=0)


def test_unreachable_node_fails_fast(es_url: str) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    t0 = time.monotonic()
    with pytest.raises(EngineUnavailable, match="not reachable"):
        ElasticsearchIndex(url, "anything")
    assert time.monotonic() - t0 < 3.0


def test_open_index_spec_and_rank_feature_mapping(es_url: str, index: ElasticsearchIndex) -> None:
    with open_index(f"{es_url}/{index.alias}") as same:
        assert same.count() == 1
    (concrete,) = index._active()
    mapping = index._client.indices.get_mapping(index=concrete)[concrete]["mappings"]
    assert mapping["properties"]["terms"] == {"type": "rank_features"}
    assert mapping["properties"]["metadata"]["enabled"] is False
    # Arbitrary metadata never changes the mapping (no dynamic fields).
    index.upsert([TermDocument("meta", {1: 1.0}, {"nested": {"deep": [1, {"x": "y"}]}, "k-1": None})])
    assert index.get("meta").metadata == {"nested": {"deep": [1, {"x": "y"}]}, "k-1": None}
    assert index._client.indices.get_mapping(index=concrete)[concrete]["mappings"] == mapping
    index.delete(["meta"])


def test_stalled_node_times_out_as_unavailable(es_url: str, index: ElasticsearchIndex) -> None:
    with FaultProxy(es_url, delay=3.0) as proxy:
        slow = ElasticsearchIndex(proxy.url, index.alias, request_timeout=0.5)
        t0 = time.monotonic()
        with pytest.raises(EngineUnavailable, match="timed out"):
            slow.search({1: 1.0})
        assert time.monotonic() - t0 < 2.5
        slow.close()


def test_elasticsearch_400_becomes_invalid_query(index: ElasticsearchIndex) -> None:
    with (
        pytest.raises(InvalidQuery, match="^Elasticsearch rejected.*parsing_exception"),
        errors("search", engine=index.engine_label),
    ):
        index._client.search(index=index.alias, query={"no_such_query": {}})


def test_a_search_is_asked_again_only_when_a_node_left_mid_request() -> None:
    """Answers as Elasticsearch 7.17 gave them when a node was SIGKILLed under a search stream."""
    from elasticsearch import exceptions as es

    from vsparta.termindex.elastic.reads import _node_left

    def partial(kind: str) -> dict:
        return {"_shards": {"total": 6, "successful": 5, "failed": 1,
                            "failures": [{"shard": 2, "reason": {"type": kind, "reason": "x"}}]}}  # fmt: skip

    assert _node_left(partial("node_disconnected_exception"))
    assert not _node_left(partial("query_shard_exception"))  # a bad query stays an error
    assert not _node_left({"_shards": {"total": 6, "successful": 6, "failed": 0}})
    # the term statistics' _msearch (OpenSearch 2.19, a node SIGKILLed under a search stream)
    whole = {"_shards": {"total": 6, "successful": 6, "failed": 0}}
    assert _node_left({"responses": [whole, partial("node_disconnected_exception")]})
    assert not _node_left({"responses": [whole, partial("query_shard_exception")]})
    assert not _node_left({"responses": [whole, whole]})
    left = {"type": "node_not_connected_exception", "reason": "[vsparta-42101] Node not connected"}
    fetch = {"error": {"root_cause": [], "type": "search_phase_execution_exception", "caused_by": left}}
    # one of the _msearch's requests lost its fetch phase's node: the error is inline, status 500
    assert _node_left({"responses": [whole, {**fetch, "status": 500}]})
    assert _node_left({"responses": [{**fetch, "status": 500}, partial("node_disconnected_exception")]})
    bad = {"error": {"type": "query_shard_exception", "reason": "no such field"}, "status": 400}
    assert not _node_left({"responses": [whole, bad]})
    assert not _node_left({"responses": [{**fetch, "status": 500}, bad]})  # the bad one would fail again
    # an _mget of the hits' metadata: each document's outcome inline
    found = {"_id": "a", "found": True, "_source": {"metadata": {}}}
    assert _node_left({"docs": [found, {"_id": "b", **fetch}]})
    assert not _node_left({"docs": [found, {"_id": "b", "found": False}]})
    phase = "search_phase_execution_exception"
    assert _node_left(es.TransportError(500, phase, fetch))
    assert not _node_left(es.TransportError(500, phase, {"error": {"type": "x"}}))


def test_a_hit_whose_metadata_cannot_be_read_is_refused_not_shown_without_it() -> None:
    """An _mget document that failed inline is a 503, like a partial search (not a hit without metadata)."""
    from vsparta.termindex.base import Hit
    from vsparta.termindex.elastic.common import fill_metadata
    from vsparta.termindex.errors import EngineUnavailable

    hits = [Hit(id="a", score=2.0, metadata=None), Hit(id="b", score=1.0, metadata={"path": "b.jpg"})]
    answer = {"docs": [{"_id": "a", "found": True, "_source": {"metadata": {"path": "a.jpg"}}}]}
    assert [h.metadata for h in fill_metadata(hits, answer)] == [{"path": "a.jpg"}, {"path": "b.jpg"}]
    gone = {"docs": [{"_id": "a", "found": False}]}  # deleted since the search: no metadata to show
    assert fill_metadata(hits, gone)[0].metadata == {}
    unavailable = {"_id": "a", "error": {"type": "no_shard_available_action_exception", "reason": "x"}}
    with pytest.raises(EngineUnavailable, match=r"^1 of the hits' metadata .*no_shard_available_action"):
        fill_metadata(hits, {"docs": [unavailable]})
