"""Elasticsearch's ``AsyncReader`` (``termindex.reader``): the service's read side.

The reads are ``vsparta.termindex.elastic.reads``' steps, the same the synchronous engine runs,
here awaited: both send and read exactly the same JSON.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, TypeVar

from vsparta.termindex.base import Hit, TermDocument, TermStatistics
from vsparta.termindex.elastic import leases
from vsparta.termindex.elastic.common import (
    client_options,
    make_client,
    pop_track_total_hits,
    validate_alias,
)
from vsparta.termindex.elastic.hedging import Hedge
from vsparta.termindex.elastic.reads import ReadSteps, Steps, run_async
from vsparta.termindex.elastic.statistics import StatisticsCache
from vsparta.termindex.elastic.translate import errors
from vsparta.termindex.elastic.transport import AsyncCheckedClient
from vsparta.termindex.elastic.versions import missing_index
from vsparta.termindex.errors import IndexNotFound, TermIndexError, WrongBackend
from vsparta.termindex.reader import AsyncReader, Capability

__all__ = ["AsyncElasticsearchIndex"]

log = logging.getLogger(__name__)
T = TypeVar("T")


class AsyncElasticsearchIndex(ReadSteps, AsyncReader):
    """Read side for the async service: search, get, count, statistics, the cluster's health.

    Constructing it contacts nothing, so the service can start before Elasticsearch does. An
    index a killed load left without its serving settings gets them back at ``start`` and on each
    ``health`` (``elastic.leases``). Options: those of ``ElasticsearchIndex``'s client
    (``request_timeout``, credentials), ``track_total_hits``, and ``hedge_after`` ("auto", seconds
    or "off": when a read over several hosts is sent again to another, ``elastic.hedging``).
    """

    capabilities: ClassVar[frozenset[Capability]] = frozenset({Capability.HEALTH})
    client_class: Any = AsyncCheckedClient  # servers' check on connect (elastic.transport)
    engine_label = "Elasticsearch"
    spec_prefix = ""  # before the URL in a backend spec that names this engine

    def __init__(self, url: str, name: str, **options: Any) -> None:
        self.url = url
        self.alias = validate_alias(name)
        self._target = self.alias
        client_kwargs, rest = client_options(options)
        self._track_total_hits = pop_track_total_hits(rest)
        self.hedge = Hedge.from_option(rest.pop("hedge_after", "auto"), client_kwargs["timeout"])
        self._statistics = StatisticsCache()
        if rest:
            raise ValueError(f"unknown {self.engine_label} options: {sorted(rest)}")
        self._client = make_client(self.client_class, url, client_kwargs | {"hedge": self.hedge})
        self._recovered_at = -float("inf")
        self._watch = leases.LeaseWatch()

    async def _run(self, steps: Steps[T]) -> T:
        try:
            return await run_async(self._client, steps, self.engine_label)
        except IndexNotFound as exc:  # the synchronous engine's sentence, with the command to run
            raise IndexNotFound(
                missing_index(self.engine_label, self.spec_prefix, self.url, self.alias)
            ) from exc

    async def search(self, query: Mapping[int, float], k: int = 10, explain: bool = False) -> list[Hit]:
        return await self._run(self._search_steps(query, k, explain))

    async def get(self, doc_id: str) -> TermDocument:
        return await self._run(self._get_steps(doc_id))

    async def term_statistics(self, term_ids: Sequence[int]) -> TermStatistics:
        return await self._run(self._term_statistics_steps(term_ids))

    async def count(self) -> int:
        return await self._run(self._count_steps())

    async def ping(self) -> bool:
        try:
            return await self._run(self._ping_steps())
        except Exception:  # any failure means "not reachable"
            return False

    async def health(self) -> str:
        """The cluster's health for this index: green, yellow (a replica missing: answers are
        complete) or red (a primary missing: searches answer 503 until it is back)."""
        await self._recover()
        return await self._run(self._health_steps())

    async def start(self) -> None:
        await self._recover()

    async def _recover(self) -> None:
        try:
            await self.recover_stale_loads()
        except WrongBackend:  # the spec's mistake (two clusters): said once, by the caller
            raise
        except TermIndexError as exc:  # not reachable yet: the next readiness check asks again
            log.info("could not check the index for killed loads yet: %s", exc)

    async def recover_stale_loads(self, every_s: float = leases.DEFAULT_LEASE_S / 2) -> list[str]:
        """Serving settings back on indices left by a killed load (``elastic.leases``: one whose beat
        this reader has seen stand still for a lease); asks at most once per ``every_s``, or sooner
        once a watched beat has stood still for its lease (the service calls it at start and on
        each readiness check)."""
        if time.monotonic() - self._recovered_at < every_s and not self._watch.due():
            return []
        restored = await self._run(leases.recover_steps(self.alias, self._watch))
        self._recovered_at = time.monotonic()
        return restored

    async def ready(self) -> bool:
        """Reachable and the alias exists (what a readiness probe needs)."""
        try:
            with errors("ready", engine=self.engine_label):
                return bool(await self._client.indices.exists(index=self.alias))
        except TermIndexError:
            return False

    async def close(self) -> None:
        await self._client.close()
        # The client closes only the nodes it holds alive; one marked dead (a host list with a node
        # down) would leave its HTTP session open.
        pool = self._client.transport.connection_pool
        for connection in getattr(pool, "orig_connections", ()):
            if connection not in pool.connections:
                await connection.close()
