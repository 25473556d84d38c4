"""The service's one wrapper around an engine's reader: one timeout for every call, outages logged.

The reader is the engine's ``AsyncReader`` (``termindex.reader``: Elasticsearch's async client, or
a synchronous engine in threads), opened by ``termindex.registry.open_reader``. Here every call
gets the service's timeout; a call that runs past it, or a client error that means the engine
cannot serve, becomes ``EngineUnavailable`` (HTTP 503 with Retry-After), and recoveries end the
outage's log (``OutageLog``, below). Handlers only ever see ``vsparta.termindex.errors``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TypeVar

from vsparta.termindex import Hit, TermDocument, registry
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

log = logging.getLogger(__name__)
# The outage lines have a logger of their own, the name README gives operators to filter them by.
outage_log = logging.getLogger("vsparta.service.outage")
T = TypeVar("T")


# ---- the outage log ----------------------------------------------------------------------------


def client_loggers() -> list[logging.Logger]:
    """The engines' client loggers (``Engine.client_loggers``): a client such as Elasticsearch's
    logs a warning with a traceback for each failed attempt; ``DropClientFailures`` drops those."""
    return [logging.getLogger(name) for name in registry.client_loggers()]


SUMMARY_INTERVAL_S = 10.0
MAX_REASON_CHARS = 300


def _short(text: str, limit: int = MAX_REASON_CHARS) -> str:
    """One line of at most ``limit`` characters (a reason or a request's path can be long)."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _reason(exc: BaseException) -> str:
    return _short(str(exc) or type(exc).__name__)


class OutageLog:
    """Log an engine outage in a bounded volume, however many clients keep asking.

    While the engine is down every request fails the same way. One line per failed request made
    ~1 MB of log in 10 s from 8 clients; a long outage filled disks. The log now gets:

    - the first failure of an outage, with its reason (the traceback only at DEBUG, i.e. ``-v``);
    - at most one summary line per interval: "search engine unreachable: 3,815 requests answered
      503 in the last 10 s" (written when the next failure comes after the interval ended);
    - one line when it recovers, with the outage's length and count.

    An outage that starts within an interval of the last recovery line (a flapping engine) is not
    announced again: its failures go into the next summary or recovery line. So at most three lines
    per interval, each at most ``MAX_REASON_CHARS`` of reason: under 10 KB per minute for any number
    of clients (``tests/service/test_service_outage.py`` counts the bytes).

    Outage state of one engine (per app: two apps in one process log independently). Called from
    the event loop only (error handlers, readiness), so it needs no lock.
    """

    def __init__(
        self, interval_s: float = SUMMARY_INTERVAL_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.interval_s = interval_s
        self._clock = clock  # a test's own clock: the intervals must not depend on the machine's load
        self._down = False
        self._recovered_at: float | None = None  # when the last announced outage ended
        self._announced = False  # is the current outage one that was announced?
        self._since = 0.0  # start of the announced outage
        self._failures = 0  # failures since the announced outage began (flaps included)
        self._window_start = 0.0
        self._window_failures = 0  # failures not yet in a summary line

    @property
    def down(self) -> bool:
        return self._down

    def failed(self, where: str, exc: BaseException, traceback: bool = True) -> None:
        """Count one failed request; log only what the rules above allow."""
        now = self._clock()
        if not self._down:
            self._down = True
            flapping = self._recovered_at is not None and now - self._recovered_at < self.interval_s
            if not flapping:
                brief = self._window_failures  # from outages too brief to announce, not yet logged
                self._announced, self._since = True, now
                self._failures, self._window_start, self._window_failures = 1, now, 0
                outage_log.warning(
                    "%s: search engine unreachable: %s%s",
                    _short(where, 120),
                    _reason(exc),
                    f" (before it, {brief:,} requests answered 503 in brief outages)" if brief else "",
                )
                if traceback:
                    outage_log.debug("the first failure of this outage", exc_info=exc)
                return
        self._failures += 1
        self._window_failures += 1
        if now - self._window_start >= self.interval_s:
            outage_log.warning(
                "search engine unreachable: %s requests answered 503 in the last %.3g s (%s)",
                f"{self._window_failures:,}",
                now - self._window_start,
                _reason(exc),
            )
            self._window_start, self._window_failures = now, 0

    def recovered(self) -> None:
        if not self._down:
            return
        self._down = False
        if self._announced:
            self._announced, self._recovered_at = False, self._clock()
            outage_log.warning(
                "search engine available again after %.1f s (%s requests answered 503)",
                self._clock() - self._since,
                f"{self._failures:,}",
            )
            self._window_failures = 0


class DropClientFailures(logging.Filter):
    """Drop a client library's per-attempt failure records (they carry a traceback each).

    The service logs outages itself (``OutageLog``), so these only repeated them.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return record.exc_info is None or record.levelno < logging.WARNING


# ---- the wrapper -------------------------------------------------------------------------------
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
    return ServiceEngine(registry.open_reader(spec, timeout_s), timeout_s, outage, registry.engine_of(spec))
