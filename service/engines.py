"""Async access to a term index for the request handlers, with one timeout for every call.

The embedded engine is synchronous (memory-mapped files): its calls run in the threadpool so a
slow query never blocks the event loop. Elasticsearch uses the async client. Both raise only
``vsparta.termindex.errors`` exceptions to the handlers; a call that runs past the timeout becomes
``EngineUnavailable`` (HTTP 503 with Retry-After).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import anyio.to_thread

from vsparta.service.outage import OutageLog
from vsparta.termindex import Hit, TermDocument, TermIndex, heaviest_terms, parse_spec
from vsparta.termindex.base import TermStatistics
from vsparta.termindex.errors import (
    DocumentNotFound,
    EngineUnavailable,
    IndexNotFound,
    InvalidInput,
    TermIndexError,
)
from vsparta.termindex.plugin import Engine
from vsparta.termindex.registry import engine_of

log = logging.getLogger(__name__)
T = TypeVar("T")


class ServiceEngine(ABC):
    """What the routes need from an index: search, fetch, count, readiness."""

    def __init__(
        self, timeout_s: float, outage: OutageLog | None = None, engine: Engine | None = None
    ) -> None:
        self.timeout_s = timeout_s
        self.outage = outage or OutageLog()
        self.engine = engine

    async def _bounded(self, make: Callable[[], Awaitable[T]], what: str) -> T:
        """One engine call under the timeout; a timeout or an engine that cannot serve -> 503."""
        try:
            result = await asyncio.wait_for(make(), timeout=self.timeout_s)
        except (asyncio.TimeoutError, TimeoutError):
            raise EngineUnavailable(f"search engine timed out after {self.timeout_s:g}s ({what})") from None
        except Exception as exc:  # unreachable, or the server answered but is not the engine: a 503
            better = engine_outage(exc, self.engine) if self.engine is not None else None
            if better is None:
                raise
            raise better from exc
        self.outage.recovered()
        return result

    @abstractmethod
    async def search(self, query: Mapping[int, float], k: int, explain: bool) -> list[Hit]: ...

    @abstractmethod
    async def get(self, doc_id: str) -> TermDocument: ...

    @abstractmethod
    async def similar(self, doc_id: str, k: int, n_terms: int, explain: bool) -> list[Hit]:
        """More like this: ``TermIndex.similar`` (the engines' one definition of it)."""

    async def get_image(self, doc_id: str) -> TermDocument:
        """``get`` for an id from a URL: one no engine could store is simply not there (404)."""
        try:
            return await self.get(doc_id)
        except InvalidInput:
            raise DocumentNotFound(doc_id) from None

    @abstractmethod
    async def count(self) -> int: ...

    @abstractmethod
    async def term_statistics(self, term_ids: Sequence[int]) -> TermStatistics:
        """Document count and frequencies of ``term_ids`` (query-side IDF weights)."""

    async def ready(self) -> tuple[bool, str]:
        """(ready?, reason): reachable and the index exists. The reason is for clients: the log
        gets the engine's own message (paths, hosts), the answer does not."""
        try:
            n = await self.count()
        except TermIndexError as exc:
            self.outage.failed("readiness", exc, traceback=False)
            return False, public_reason(exc)
        return True, f"{n} documents"

    @abstractmethod
    async def close(self) -> None: ...

    async def start(self) -> None:  # noqa: B027 - optional hook
        """Called once at app startup; engines that need a warm-up do it here."""


def warm_up(index: TermIndex) -> None:
    """Run one search and one fetch through ``index`` (JIT compilation, page cache).

    Uses a real document's terms when the engine can list documents, so the search kernels run.
    """
    first = None
    iterate = getattr(index, "iter_documents", None)
    if callable(iterate):
        first = next(iter(iterate()), None)
    if first is None:
        return
    index.get(first.id)
    top = heaviest_terms(first.weights, 8)
    index.search(dict(top), k=2, explain=True)
    index.search(dict(top[:1]), k=1, explain=False)


class ThreadedEngine(ServiceEngine):
    """A synchronous ``TermIndex`` opened lazily, so the service starts before the index exists.

    Opening also warms the index up (one real search and one fetch), because the embedded
    engine compiles its kernels at first use: that must not count against a request's timeout.
    Opening runs as one background task: a request that times out waiting for it gets a 503,
    and the next request waits on the same task instead of starting another.
    """

    def __init__(
        self,
        opener: Callable[[], TermIndex],
        timeout_s: float,
        outage: OutageLog | None = None,
        engine: Engine | None = None,
    ) -> None:
        super().__init__(timeout_s, outage, engine)
        self._opener = opener
        self._index: TermIndex | None = None
        self._opening: asyncio.Future[TermIndex] | None = None

    def _open_and_warm(self) -> TermIndex:
        index = self._opener()
        try:
            warm_up(index)
        except TermIndexError as exc:  # an empty or odd index still serves; say why it is cold
            log.info("index warm-up skipped: %s", exc)
        return index

    async def start(self) -> None:
        """Open and warm up now (at app startup), without a timeout; a missing index is not fatal."""
        try:
            await self._ensure_open(timeout_s=None)
        except TermIndexError as exc:
            log.warning("index not open yet: %s", exc)

    async def _ensure_open(self, timeout_s: float | None = -1.0) -> TermIndex:
        if self._index is not None:
            return self._index
        if self._opening is None:
            self._opening = asyncio.ensure_future(anyio.to_thread.run_sync(self._open_and_warm))
        opening = self._opening
        wait = self.timeout_s if timeout_s == -1.0 else timeout_s
        try:
            index = await asyncio.wait_for(asyncio.shield(opening), timeout=wait)
        except (asyncio.TimeoutError, TimeoutError):
            raise EngineUnavailable(
                "search index is still opening (first use compiles its kernels)"
            ) from None
        except FileNotFoundError as exc:
            self._opening = None  # try again on the next request
            raise IndexNotFound(str(exc)) from exc
        except BaseException:
            if opening.done():
                self._opening = None
            raise
        self._index = index
        return index

    async def _call(self, what: str, method: str, *args: Any, **kwargs: Any) -> T:
        index = await self._ensure_open()
        bound = functools.partial(getattr(index, method), *args, **kwargs)

        async def run() -> T:
            # abandon_on_cancel: a timed-out call leaves its thread to finish, the request moves on.
            return await anyio.to_thread.run_sync(bound, abandon_on_cancel=True)

        return await self._bounded(run, what)

    async def search(self, query: Mapping[int, float], k: int, explain: bool) -> list[Hit]:
        return await self._call("search", "search", dict(query), k=k, explain=explain)

    async def get(self, doc_id: str) -> TermDocument:
        return await self._call("get", "get", doc_id)

    async def similar(self, doc_id: str, k: int, n_terms: int, explain: bool) -> list[Hit]:
        return await self._call("similar", "similar", doc_id, k=k, n_terms=n_terms, explain=explain)

    async def count(self) -> int:
        return await self._call("count", "count")

    async def term_statistics(self, term_ids: Sequence[int]) -> TermStatistics:
        return await self._call("term statistics", "term_statistics", list(term_ids))

    async def close(self) -> None:
        if self._opening is not None and not self._opening.done():
            with contextlib.suppress(BaseException):
                await self._opening
        if self._index is not None:
            await anyio.to_thread.run_sync(self._index.close)
            self._index = None
        self._opening = None


class AsyncIndexEngine(ServiceEngine):
    """An async engine client (Elasticsearch): calls awaited directly, reconnecting per request."""

    def __init__(
        self, client: Any, timeout_s: float, outage: OutageLog | None = None, engine: Engine | None = None
    ) -> None:
        super().__init__(timeout_s, outage, engine)
        self._client = client

    async def search(self, query: Mapping[int, float], k: int, explain: bool) -> list[Hit]:
        return await self._bounded(lambda: self._client.search(dict(query), k=k, explain=explain), "search")

    async def get(self, doc_id: str) -> TermDocument:
        return await self._bounded(lambda: self._client.get(doc_id), "get")

    async def similar(self, doc_id: str, k: int, n_terms: int, explain: bool) -> list[Hit]:
        return await self._bounded(
            lambda: self._client.similar(doc_id, k=k, n_terms=n_terms, explain=explain), "similar"
        )

    async def count(self) -> int:
        return await self._bounded(lambda: self._client.count(), "count")

    async def term_statistics(self, term_ids: Sequence[int]) -> TermStatistics:
        return await self._bounded(lambda: self._client.term_statistics(list(term_ids)), "term statistics")

    async def start(self) -> None:
        await self._recover_stale_loads()

    async def _recover_stale_loads(self) -> None:
        """An index a killed load left without its serving settings gets them back (``elastic.leases``)."""
        recover = getattr(self._client, "recover_stale_loads", None)
        if recover is None:
            return
        try:
            await self._bounded(recover, "recover serving settings")
        except TermIndexError as exc:  # not reachable yet: the next readiness check asks again
            log.info("could not check the index for killed loads yet: %s", exc)

    async def ready(self) -> tuple[bool, str]:
        """Also the cluster's health: red (a shard without any copy) is not ready."""
        await self._recover_stale_loads()
        ok, detail = await super().ready()
        if not ok or not hasattr(self._client, "health"):
            return ok, detail
        try:
            status = await self._bounded(lambda: self._client.health(), "health")
        except TermIndexError as exc:
            return False, f"engine unavailable: {exc}"
        return status != "red", f"{detail}, cluster {status}"

    async def close(self) -> None:
        await self._client.close()


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
    """The engine a backend spec names; nothing is contacted until the first request."""
    parsed = parse_spec(spec)
    engine = engine_of(parsed)
    if engine.open_async is not None:
        try:
            client = engine.open_async(parsed, timeout_s)
        except ImportError as exc:
            raise RuntimeError(
                f"backend {spec!r} needs the {engine.label} client: {engine.install_hint}"
            ) from exc
        return AsyncIndexEngine(client, timeout_s, outage, engine)
    return ThreadedEngine(lambda: engine.open(parsed, create=False), timeout_s, outage, engine)
