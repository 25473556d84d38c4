"""What a load leaves behind without a record heals too (``termindex/elastic/leases.py``), and a
failed load shows its documents only after a refresh of every shard (``elastic/loading.py``).

A request held by a slow or cut link can reach the engine after its load has ended: the soak on
OpenSearch 2.19 once ended with refreshes off and no load on record (CI, stop 39), and once with a
load's documents hidden by an alias filter nobody would lift. Here those late requests are sent by
hand after a real load against a real node; an opener that has seen the state stand for a lease
puts the serving settings back, refreshes and shows the documents, in one log line.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest
from elastic_testkit import FaultProxy, random_docs, served_index

from vsparta.termindex.base import TermDocument
from vsparta.termindex.elastic import leases
from vsparta.termindex.elastic.index import ElasticsearchIndex

pytestmark = pytest.mark.elasticsearch

LEASE_S = 2.0


def _settings(index: ElasticsearchIndex) -> dict[str, Any]:
    (name,) = index._concrete()
    flat = index._client.indices.get_settings(index=name, flat_settings=True)[name]["settings"]
    return {k: flat.get(k) for k in leases.LOAD_KEYS}


def _hidden(index: ElasticsearchIndex) -> set[str]:
    (jobs,) = index._run(leases.hidden_steps(index.alias)).values()
    return jobs


def _new_docs(n: int, seed: int) -> list[TermDocument]:
    return [TermDocument(f"new{seed}-{d.id}", d.weights) for d in random_docs(n, 300, seed=seed)]


@pytest.fixture
def served(es_url: str) -> Iterator[ElasticsearchIndex]:
    """A served index with 50 documents, deleted afterwards; loads through it take a short lease."""
    with served_index(es_url, "leftover", load_lease_s=LEASE_S) as index:
        yield index


def test_refreshes_off_and_a_hidden_load_with_no_record_are_restored_a_lease_later(
    es_url: str, served: ElasticsearchIndex, caplog: pytest.LogCaptureFixture
) -> None:
    before = _settings(served)
    with served.bulk_load():
        job = served._load_job
        served.upsert(_new_docs(20, 2), refresh=False)
    assert served.count() == 70 and _hidden(served) == set()
    # The load's first requests, held by a link, arrive after its end:
    (name,) = served._concrete()
    served._client.indices.put_settings(index=name, body={"index.refresh_interval": "-1"})
    served._run(leases.hide_steps(served.alias, name, [job]))
    assert served.count() == 50
    caplog.set_level(logging.WARNING, logger="vsparta.termindex.elastic.leases")
    with ElasticsearchIndex(es_url, served.alias, load_lease_s=LEASE_S) as opener:
        assert opener.recover_stale_loads() == []  # a first look only starts the watch
        assert _settings(opener)["index.refresh_interval"] == "-1"
        time.sleep(LEASE_S + 0.5)
        assert opener.recover_stale_loads() == [name]
        assert opener.recover_stale_loads() == []  # nothing left
    assert _settings(served) == before and _hidden(served) == set() and served.count() == 70
    lines = [r.getMessage() for r in caplog.records if "restored serving settings" in r.getMessage()]
    assert len(lines) == 1 and "no load on record" in lines[0] and job in lines[0], lines


def test_a_state_that_changes_is_watched_again(es_url: str, served: ElasticsearchIndex) -> None:
    """A leftover that changes between two looks (here: another job hidden) starts a new lease."""
    (name,) = served._concrete()
    served._run(leases.hide_steps(served.alias, name, ["job-a"]))
    with ElasticsearchIndex(es_url, served.alias, load_lease_s=LEASE_S) as opener:
        assert opener.recover_stale_loads() == []
        time.sleep(LEASE_S + 0.5)
        served._run(leases.hide_steps(served.alias, name, ["job-a", "job-b"]))
        assert opener.recover_stale_loads() == []  # changed: watched from now
        assert _hidden(served) == {"job-a", "job-b"}
        time.sleep(LEASE_S + 0.5)
        assert opener.recover_stale_loads() == [name]
    assert _hidden(served) == set()


def test_a_failed_load_refreshes_every_shard_before_it_shows_what_it_wrote(
    es_url: str, served: ElasticsearchIndex
) -> None:
    """Between putting the serving settings back and showing the load's documents (the alias
    update), one refresh: the engine's own refresh on the interval change runs on each node in the
    background, so without it a search could see some shards' part only."""
    with (
        FaultProxy(es_url, path="_nothing_fails") as proxy,
        ElasticsearchIndex(proxy.url, served.alias) as index,
    ):
        with pytest.raises(RuntimeError, match="the load failed"), index.bulk_load():
            index.upsert(_new_docs(20, 3), refresh=False)
            proxy.requests.clear()
            raise RuntimeError("the load failed")
        steps = [
            "settings" if "/_settings" in path and method == "PUT" else "refresh" if "/_refresh" in path
            else "alias" if path.startswith("/_aliases") else None
            for method, path in proxy.requests
        ]  # fmt: skip
    assert [s for s in steps if s][-3:] == ["settings", "refresh", "alias"], proxy.requests
    assert served.count() == 70


def test_a_failed_load_that_cannot_refresh_keeps_its_documents_hidden_until_the_next_load_ends(
    es_url: str, served: ElasticsearchIndex
) -> None:
    """Its refresh refused (a node cut off answers no better): settings back, record removed, its
    documents still hidden; the next load keeps them hidden while it runs and shows both at its end."""
    before = _settings(served)
    with FaultProxy(es_url, mode="503", failures=0, path="_refresh") as proxy:
        with ElasticsearchIndex(proxy.url, served.alias, load_lease_s=LEASE_S) as index:
            with pytest.raises(RuntimeError, match="the load failed"), index.bulk_load():
                failed_job = index._load_job
                index.upsert(_new_docs(20, 4), refresh=False)
                proxy.failures = 1000  # every refresh from now on answers 503
                raise RuntimeError("the load failed")
    assert _settings(served) == before and served._run(leases.read_steps(served.alias)) == {
        served._concrete()[0]: {}
    }
    assert _hidden(served) == {failed_job} and served.count() == 50
    with ElasticsearchIndex(es_url, served.alias, load_lease_s=LEASE_S) as index, index.bulk_load():
        index.upsert(_new_docs(10, 5), refresh=False)
        assert _hidden(served) == {failed_job, index._load_job}
    assert _hidden(served) == set() and served.count() == 80
