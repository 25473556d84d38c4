"""Bulk loads survive 429 rejections and lost connections, with exponential backoff.

The faults come from a real HTTP proxy between the client and the node (elastic_testkit).
"""

from __future__ import annotations

import threading
import time

import pytest
from elastic_testkit import FaultProxy, fresh_index

from vsparta.termindex.base import TermDocument
from vsparta.termindex.elastic.index import ElasticsearchIndex
from vsparta.termindex.errors import EngineUnavailable

pytestmark = pytest.mark.elasticsearch

DOCS = [TermDocument(f"r-{i:03d}", {1: 1.0 + i, 2: 0.5}) for i in range(120)]
# One connection: the backoff of consecutive failures is then measurable as elapsed time.
FAST = {"initial_backoff": 0.1, "max_backoff": 2.0, "chunk_size": 50, "connections": 1}


@pytest.mark.parametrize("mode", ["429", "429-items", "drop"])
def test_bulk_retries_with_backoff_then_succeeds(es_url: str, mode: str) -> None:
    with (
        fresh_index(es_url, f"retry-{mode.replace('-', '')}") as index,
        FaultProxy(es_url, mode, failures=3) as proxy,
    ):
        via_proxy = ElasticsearchIndex(proxy.url, index.alias, max_retries=5, **FAST)
        t0 = time.monotonic()
        assert via_proxy.upsert(DOCS) == len(DOCS)
        elapsed = time.monotonic() - t0
        via_proxy.close()
        assert proxy.bulk_failed == 3
        assert proxy.bulk_attempts >= 3 + 3  # 3 windows of 50 docs, plus the 3 failed tries
        assert elapsed >= 0.1 + 0.2 + 0.4  # the backoff doubled: 0.1, 0.2, 0.4 s
        assert index.count() == len(DOCS)  # retried windows overwrote, never duplicated


@pytest.mark.parametrize("mode", ["429", "drop"])
def test_bulk_gives_up_after_max_retries(es_url: str, mode: str) -> None:
    with fresh_index(es_url, f"giveup-{mode}") as index, FaultProxy(es_url, mode, failures=100) as proxy:
        via_proxy = ElasticsearchIndex(proxy.url, index.alias, max_retries=2, **FAST)
        with pytest.raises(EngineUnavailable):
            via_proxy.upsert(DOCS)
        via_proxy.close()
        assert proxy.bulk_attempts == 3  # the first try and 2 retries, then a clear error


def test_bulk_survives_node_port_closed_then_reopened(es_url: str) -> None:
    """Connection refused for a while (node restarting), then the node answers again."""
    with fresh_index(es_url, "refused") as index:
        proxy = FaultProxy(es_url).start()
        via_proxy = ElasticsearchIndex(proxy.url, index.alias, max_retries=6, **FAST)
        proxy.stop()  # nothing listens on the port now
        reopen = threading.Timer(1.0, proxy.start)
        reopen.start()
        try:
            t0 = time.monotonic()
            assert via_proxy.upsert(DOCS) == len(DOCS)
            assert time.monotonic() - t0 >= 0.9
        finally:
            reopen.join()
            proxy.stop()
            via_proxy.close()
        assert index.count() == len(DOCS)
