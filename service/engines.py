"""The service's one wrapper around an engine's reader: one timeout for every call, outages logged.

The reader is the engine's ``AsyncReader`` (``termindex.reader``: Elasticsearch's async client, or
a synchronous engine in threads), opened by ``termindex.registry.open_reader``. Here every call
gets the service's timeout; a call that runs past it, or a client error that means the engine
cannot serve, becomes ``EngineUnavailable`` (HTTP 503 with Retry-After), and recoveries end the
outage's log (``outage.OutageLog``). Handlers only ever see ``vsparta.termindex.errors``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Mapping, Sequence
from typing import TypeVar

from vsparta.service.outage import OutageLog
from vsparta.termindex import Hit, TermDocument
from vsparta.termindex.base import TermStatistics
from vsparta.termindex.errors import (
    DocumentNotFound,
    EngineUnavailable,
    IndexNotFound,
    InvalidInput,
    TermIndexError,
)
from vsparta.termindex.plugin import Engine
from vsparta.termindex.reader import AsyncReader, Capability
from vsparta.termindex.registry import engine_of, open_reader

log = logging.getLogger(__name__)
T = TypeVar("T")


class ServiceEngine(AsyncReader):
    """``reader`` with every call under ``timeout_s``: itself an ``AsyncReader``, so the search
    pipeline takes either (``vsparta search`` hands it the bare reader)."""

    def __init__(
        self,
        reader: AsyncReader,
        timeout_s: float,
        outage: OutageLog | None = None,
        engine: Engine | None = None,
    ) -> None:
        self.reader = reader
        self.timeout_s = timeout_s
        self.outage = outage or OutageLog()
        self.engine = engine

    @property
    def capabilities(self) -> frozenset[Capability]:  # type: ignore[override]  # the reader's
        return self.reader.capabilities

    async def _bounded(self, call: Awaitable[T], what: str, reached: bool = True) -> T:
        """One engine call under the timeout; a timeout or an engine that cannot serve -> 503.
        ``reached``: an answer proves the engine answers (not so for one a cache may give)."""
        try:
            result = await asyncio.wait_for(call, timeout=self.timeout_s)
        except TimeoutError:
            raise EngineUnavailable(f"search engine timed out after {self.timeout_s:g}s ({what})") from None
        except Exception as exc:  # unreachable, or the server answered but is not the engine: a 503
            better = engine_outage(exc, self.engine) if self.engine is not None else None
            if better is None:
                raise
            raise better from exc
        if reached:
            self.outage.recovered()
        return result

    async def search(self, query: Mapping[int, float], k: int, explain: bool) -> list[Hit]:
        return await self._bounded(self.reader.search(query, k, explain), "search")

    async def get(self, doc_id: str) -> TermDocument:
        return await self._bounded(self.reader.get(doc_id), "get")

    async def get_image(self, doc_id: str) -> TermDocument:
        """``get`` for an id from a URL: one no engine could store is simply not there (404)."""
        try:
            return await self.get(doc_id)
        except InvalidInput:
            raise DocumentNotFound(doc_id) from None

    async def count(self) -> int:
        return await self._bounded(self.reader.count(), "count")

    async def term_statistics(self, term_ids: Sequence[int]) -> TermStatistics:
        # Elasticsearch's come from a cache when it holds every term: no sign the engine is back.
        return await self._bounded(self.reader.term_statistics(term_ids), "term statistics", reached=False)

    async def health(self) -> str:
        return await self._bounded(self.reader.health(), "health")

    async def ready(self) -> tuple[bool, str]:
        """(ready?, reason): reachable, the index exists, and a cluster's health is not red. The
        reason is for clients: the log gets the engine's own message (paths, hosts), the answer not."""
        try:
            n = await self.count()
        except TermIndexError as exc:
            self.outage.failed("readiness", exc, traceback=False)
            return False, public_reason(exc)
        detail = f"{n} documents"
        if Capability.HEALTH not in self.capabilities:
            return True, detail
        try:
            status = await self.health()
        except TermIndexError as exc:
            return False, f"engine unavailable: {exc}"
        return status != "red", f"{detail}, cluster {status}"

    async def start(self) -> None:
        """Open, warm up or repair now (at app startup); an engine not there yet is not fatal."""
        try:
            await self.reader.start()
        except TermIndexError as exc:
            log.warning("index not open yet: %s", exc)

    async def close(self) -> None:
        await self.reader.close()


class WrongServer(EngineUnavailable):
    """The configured URL is some other web server: the 503 says so (a retry will not help)."""


def public_reason(exc: BaseException) -> str:
    """What a client is told about an engine failure: the kind, never a server path or host."""
    if isinstance(exc, WrongServer):
        return f"search backend unavailable: {exc}"
    if isinstance(exc, IndexNotFound):
        return "search index not found: nothing indexed yet, or wrong index name"
    if isinstance(exc, EngineUnavailable):
        return "search backend unavailable, retry later"
    return "search backend error, retry later"


def engine_outage(exc: BaseException, engine: Engine) -> EngineUnavailable | None:
    """``EngineUnavailable`` for a client error that means the engine cannot serve, else None.

    termindex translates its client's errors; this catches one that slips through, by the types
    the engine registered (``Engine.wrong_server``: the URL answers HTTP, but not as the engine,
    e.g. the Elasticsearch client's ``UnsupportedProductError``; ``Engine.unreachable``).
    """
    wrong, unreachable = engine.wrong_server(), engine.unreachable()
    cause: BaseException | None = exc
    while cause is not None:
        if wrong and isinstance(cause, wrong):
            if type(cause) not in wrong:  # a subclass (termindex.elastic.servers) is its own sentence
                return WrongServer(str(cause))
            return WrongServer(
                f"the backend URL answers HTTP but is not {engine.label} (wrong host or port?)"
            )
        if unreachable and isinstance(cause, unreachable) and not isinstance(exc, TermIndexError):
            return EngineUnavailable(f"{engine.label} is not reachable: {cause}")
        cause = cause.__cause__
    return None


def open_engine(spec: str, timeout_s: float, outage: OutageLog | None = None) -> ServiceEngine:
    """The engine a backend spec names, behind the service's timeout; nothing is contacted yet."""
    return ServiceEngine(open_reader(spec, timeout_s), timeout_s, outage, engine_of(spec))
