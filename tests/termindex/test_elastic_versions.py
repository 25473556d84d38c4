"""Versioned indices behind the alias: atomic swap under load, rollback, repeated loads; on
Elasticsearch 7.17, OpenSearch 2.19 and 3.x (``search_server``)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from elastic_testkit import SearchServer, fresh_index, open_on, unique_name

from vsparta.termindex.base import TermDocument
from vsparta.termindex.elastic.index import AsyncElasticsearchIndex, ElasticsearchIndex
from vsparta.termindex.elastic.versions import VersionedAlias
from vsparta.termindex.errors import TermIndexError

pytestmark = pytest.mark.elasticsearch

TERM = 5


def docs(prefix: str, n: int, weight: float = 1.0) -> list[TermDocument]:
    return [
        TermDocument(f"{prefix}-{i:04d}", {TERM: weight + i / n, 9: 0.5}, {"set": prefix}) for i in range(n)
    ]


def test_alias_swap_under_concurrent_searches(search_server: SearchServer) -> None:
    with fresh_index(search_server, "swap") as index:
        index.upsert(docs("old", 200))
        errors: list[BaseException] = []
        seen: list[tuple[float, float, frozenset[str]]] = []  # (start, end, sets in the result)
        stop = threading.Event()

        def searcher() -> None:
            reader = open_on(search_server, index.alias)  # its own client, like another process
            try:
                while not stop.is_set():
                    t0 = time.monotonic()
                    try:
                        hits = reader.search({TERM: 1.0}, k=20)
                    except BaseException as exc:  # every failure counts, whatever its type
                        errors.append(exc)
                        continue
                    sets = frozenset(h.metadata["set"] for h in hits)
                    seen.append((t0, time.monotonic(), sets))
            finally:
                reader.close()

        threads = [threading.Thread(target=searcher) for _ in range(3)]
        for t in threads:
            t.start()
        try:
            time.sleep(0.5)
            new = index.begin_reindex()
            new.upsert(docs("new", 300, weight=2.0))
            time.sleep(0.3)  # searches keep running against the old version meanwhile
            commit_started = time.monotonic()
            new.commit()
            swapped_at = time.monotonic()
            time.sleep(0.7)
        finally:
            stop.set()
            for t in threads:
                t.join(30)

        assert not errors, errors[:3]
        assert len(seen) > 20
        # Never a mix: each search saw exactly one version.
        assert all(len(s) == 1 for _, _, s in seen)
        before = [s for t0, t1, s in seen if t1 < commit_started]
        after = [s for t0, t1, s in seen if t0 > swapped_at]
        assert before and all(s == {"old"} for s in before)
        assert after and all(s == {"new"} for s in after)
        assert index.count() == 300
        versions = index.list_versions()
        assert [v.active for v in versions] == [False, True]
        assert [v.docs for v in versions] == [200, 300]


def test_rollback_and_pruning_keep_old_versions(search_server: SearchServer) -> None:
    with fresh_index(search_server, "rollback", keep_versions=2) as index:
        index.upsert(docs("v1", 3))
        for n, prefix in ((4, "v2"), (5, "v3")):
            with index.begin_reindex() as new:
                new.upsert(docs(prefix, n))
        versions = index.list_versions()
        # keep_versions=2: v1 pruned, v2 kept for rollback, v3 active.
        assert [(v.number, v.active, v.docs) for v in versions] == [(2, False, 4), (3, True, 5)]
        assert index.rollback() == f"{index.alias}-v2"
        assert index.count() == 4 and index.get("v2-0000").metadata == {"set": "v2"}
        with pytest.raises(TermIndexError, match="no version"):
            index.rollback()
        index.activate(f"{index.alias}-v3")
        assert index.count() == 5


def test_failed_reindex_is_aborted_and_alias_untouched(search_server: SearchServer) -> None:
    with fresh_index(search_server, "abort") as index:
        index.upsert(docs("old", 3))
        with pytest.raises(RuntimeError), index.begin_reindex() as new:
            new.upsert(docs("new", 2))
            raise RuntimeError("indexer crashed")
        assert [v.number for v in index.list_versions()] == [1]
        assert index.count() == 3


def test_repeated_bulk_load_overwrites_never_duplicates(search_server: SearchServer) -> None:
    with fresh_index(search_server, "repeat", chunk_size=64) as index:
        batch = docs("d", 500)
        for _ in range(3):
            with index.bulk_load():
                assert index.upsert(batch) == 500
        assert index.count() == 500
        # A reload with new weights replaces the documents in place.
        changed = [TermDocument(d.id, {TERM: 7.0}, {"set": "changed"}) for d in batch[:10]]
        index.upsert(changed)
        assert index.count() == 500
        assert index.get("d-0003").weights == {TERM: 7.0}
        assert index.delete(["d-0003", "d-0003", "missing"]) == 1
        assert index.count() == 499


def test_bulk_load_disables_refresh_and_replicas_then_restores(search_server: SearchServer) -> None:
    with fresh_index(search_server, "settings") as index:
        (concrete,) = index._active()
        client = index._client
        client.indices.put_settings(index=concrete, body={"index": {"refresh_interval": "5s"}})

        def settings() -> dict:
            return client.indices.get_settings(index=concrete)[concrete]["settings"]["index"]

        with index.bulk_load():
            during = settings()
            index.upsert(docs("x", 50))
            assert index.count() == 0  # nothing refreshed yet: the load is not visible mid-way
            # ...but a resumed job sees what it already wrote (realtime get).
            assert index.existing_ids(["x-0000", "x-0049", "nope"]) == {"x-0000", "x-0049"}
        assert during["refresh_interval"] == "-1" and during["number_of_replicas"] == "0"
        after = settings()
        assert after["refresh_interval"] == "5s" and after["number_of_replicas"] == "0"
        assert index.count() == 50


def test_create_is_idempotent_and_refuses_a_concrete_index_name(search_server: SearchServer) -> None:
    with fresh_index(search_server, "idem") as index:
        index.upsert(docs("a", 2))
        again = open_on(search_server, index.alias, create=True)
        assert again.count() == 2 and len(again.list_versions()) == 1
        again.close()
    name = unique_name("concrete")
    with open_on(search_server, unique_name("tmp"), create=True) as helper:
        helper._client.indices.create(index=name)
        try:
            with pytest.raises(TermIndexError, match="not an alias"):
                open_on(search_server, name, create=True)
        finally:
            helper._client.indices.delete(index=name)
            helper.drop()


def test_new_version_loads_fast_then_gets_serving_settings(search_server: SearchServer) -> None:
    with fresh_index(search_server, "serving", replicas=0) as index:
        client = index._client
        new = index.begin_reindex()

        def settings() -> dict:
            return client.indices.get_settings(index=new.version)[new.version]["settings"]["index"]

        loading = settings()
        assert loading["refresh_interval"] == "-1" and loading["translog"]["durability"] == "async"
        new.upsert(docs("n", 20))
        new.commit()
        serving = settings()
        assert "refresh_interval" not in serving and "translog" not in serving  # back to defaults
        assert serving["number_of_replicas"] == "0"
        assert index.count() == 20


def test_jobs_creating_the_alias_together_share_one_version(search_server: SearchServer) -> None:
    """Shards of one job start at the same moment: exactly one version may end up behind the alias."""
    alias = unique_name("race")
    barrier = threading.Barrier(4)
    failures: list[BaseException] = []

    def open_it() -> None:
        barrier.wait()
        try:
            open_on(search_server, alias, create=True).close()
        except BaseException as exc:  # every failure counts
            failures.append(exc)

    threads = [threading.Thread(target=open_it) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    index = open_on(search_server, alias)
    try:
        assert failures == []
        assert index._active() == [f"{alias}-v1"]
        index.upsert(docs("one", 3))
        index.refresh()
        assert index.count() == 3
    finally:
        index.drop()
        index.close()


def test_a_writer_whose_look_missed_another_writers_new_alias_joins_it(
    search_server: SearchServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a cluster a writer's first look can go to a node whose state lags, while another writer
    creates the alias: the late writer must join that alias, neither refuse the name as a
    concrete index (CI saw this on three nodes) nor put a second version behind it."""
    alias = unique_name("late")
    real_look = VersionedAlias._indices_named
    others: list[ElasticsearchIndex] = []
    raced = threading.Event()

    def look_then_lose_the_race(self: VersionedAlias) -> set[str]:
        found = real_look(self)
        if not raced.is_set():  # the other writer creates the alias right after the first look
            raced.set()
            others.append(open_on(search_server, alias, create=True))
        return found

    monkeypatch.setattr(VersionedAlias, "_indices_named", look_then_lose_the_race)
    late = open_on(search_server, alias, create=True)
    try:
        assert len(others) == 1, "the other writer never ran: nothing was tested"
        assert late._active() == [f"{alias}-v1"] and [v.name for v in late.list_versions()] == [f"{alias}-v1"]
        late.upsert(docs("late", 3))
        others[0].upsert(docs("early", 2))
        late.refresh()
        assert late.count() == 5
    finally:
        late.drop()
        late.close()
        for other in others:
            other.close()


def test_refresh_left_off_by_a_crashed_load_is_restored(search_server: SearchServer) -> None:
    with fresh_index(search_server, "crashload") as index:
        (concrete,) = index._active()
        # what a process killed inside bulk_load() leaves behind
        index._client.indices.put_settings(index=concrete, body={"index": {"refresh_interval": "-1"}})
        with index.bulk_load():
            index.upsert(docs("after", 5))
        got = index._client.indices.get_settings(index=concrete, name="index.refresh_interval")
        # a default setting is left out of the answer altogether
        refresh = got.get(concrete, {}).get("settings", {}).get("index", {}).get("refresh_interval")
        assert refresh in (None, "1s")


def test_index_from_before_metadata_json_keeps_its_metadata_and_takes_new_writes(es_url: str) -> None:
    """An index created with the old mapping (metadata only in ``_source``): searches and
    ``existing_metadata`` still return every document's metadata (one ``_mget`` more), and writing
    to it adds the stored field to its mapping."""
    from elasticsearch import Elasticsearch

    from vsparta.termindex.elastic.common import MAPPING, METADATA_FIELD, index_body

    alias = unique_name("legacy")
    old_mapping = {
        **MAPPING,
        "properties": {k: v for k, v in MAPPING["properties"].items() if k != METADATA_FIELD},
    }
    raw = Elasticsearch([es_url])
    try:
        body = index_body(1, 0) | {"mappings": old_mapping, "aliases": {alias: {}}}
        raw.indices.create(index=f"{alias}-v1", **body)
        raw.index(
            index=alias,
            id="old",
            document={"doc_id": "old", "terms": {"5": 2.0}, "metadata": {"image": "o.png"}},
        )
        raw.indices.refresh(index=alias)
        index = ElasticsearchIndex(es_url, alias)
        try:
            [hit] = index.search({5: 1.0})
            assert (hit.id, dict(hit.metadata)) == ("old", {"image": "o.png"})
            assert asyncio.run(_async_search(es_url, alias)) == [("old", {"image": "o.png"})]
            index.upsert([TermDocument("new", {5: 1.0}, {"image": "n.png"})])
            props = raw.indices.get_mapping(index=alias)[f"{alias}-v1"]["mappings"]["properties"]
            assert props[METADATA_FIELD]["store"] is True
            hits = index.search({5: 1.0})
            assert [(h.id, dict(h.metadata)) for h in hits] == [
                ("old", {"image": "o.png"}),
                ("new", {"image": "n.png"}),
            ]
            # what --resume compares: the stored field where it exists, the old one's _source
            assert index.existing_metadata(["old", "new", "none"]) == {
                "old": {"image": "o.png"},
                "new": {"image": "n.png"},
            }
        finally:
            index.drop()
            index.close()
    finally:
        raw.close()


async def _async_search(es_url: str, alias: str) -> list[tuple[str, dict]]:
    index = AsyncElasticsearchIndex(es_url, alias)
    try:
        return [(h.id, dict(h.metadata)) for h in await index.search({5: 1.0})]
    finally:
        await index.close()
