"""Async access to a term index for the request handlers, with one timeout for every call.

The embedded engine is synchronous (memory-mapped files): its calls run in the threadpool so a
slow query never blocks the event loop. Elasticsearch uses the async client. Both raise only
``termindex.errors`` exceptions to the handlers; a call that runs past the timeout becomes
``EngineUnavailable`` (HTTP 503 with Retry-After).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import anyio.to_thread

from termindex import Hit, TermDocument, TermIndex, parse_spec
from termindex.errors import EngineUnavailable, IndexNotFound, TermIndexError

log = logging.getLogger(__name__)
T = TypeVar("T")


class ServiceEngine(ABC):
    """What the routes need from an index: search, fetch, count, readiness."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s

    async def _bounded(self, make: Callable[[], Awaitable[T]], what: str) -> T:
        try:
            return await asyncio.wait_for(make(), timeout=self.timeout_s)
        except (asyncio.TimeoutError, TimeoutError):
            raise EngineUnavailable(f"search engine timed out after {self.timeout_s:g}s ({what})") from None

    @abstractmethod
    async def search(self, query: Mapping[int, float], k: int, explain: bool) -> list[Hit]: ...

    @abstractmethod
    async def get(self, doc_id: str) -> TermDocument: ...

    @abstractmethod
    async def count(self) -> int: ...

    async def ready(self) -> tuple[bool, str]:
        """(ready?, reason): reachable and the index exists."""
        try:
            n = await self.count()
        except IndexNotFound as exc:
            return False, f"index not found: {exc}"
        except TermIndexError as exc:
            return False, f"engine unavailable: {exc}"
        return True, f"{n} documents"

    @abstractmethod
    async def close(self) -> None: ...


class ThreadedEngine(ServiceEngine):
    """A synchronous ``TermIndex`` opened lazily, so the service starts before the index exists."""

    def __init__(self, opener: Callable[[], TermIndex], timeout_s: float) -> None:
        super().__init__(timeout_s)
        self._opener = opener
        self._index: TermIndex | None = None
        self._lock = asyncio.Lock()

    async def _call(self, what: str, method: str, *args: Any, **kwargs: Any) -> T:
        index = await self._ensure_open()
        bound = functools.partial(getattr(index, method), *args, **kwargs)

        async def run() -> T:
            # abandon_on_cancel: a timed-out call leaves its thread to finish, the request moves on.
            return await anyio.to_thread.run_sync(bound, abandon_on_cancel=True)

        return await self._bounded(run, what)

    async def _ensure_open(self) -> TermIndex:
        if self._index is not None:
            return self._index
        async with self._lock:
            if self._index is None:

                async def run() -> TermIndex:
                    return await anyio.to_thread.run_sync(self._opener, abandon_on_cancel=True)

                try:
                    self._index = await self._bounded(run, "open")
                except TermIndexError:
                    raise
                except FileNotFoundError as exc:
                    raise IndexNotFound(str(exc)) from exc
        return self._index

    async def search(self, query: Mapping[int, float], k: int, explain: bool) -> list[Hit]:
        return await self._call("search", "search", dict(query), k=k, explain=explain)

    async def get(self, doc_id: str) -> TermDocument:
        return await self._call("get", "get", doc_id)

    async def count(self) -> int:
        return await self._call("count", "count")

    async def close(self) -> None:
        if self._index is not None:
            await anyio.to_thread.run_sync(self._index.close)
            self._index = None


class AsyncIndexEngine(ServiceEngine):
    """An async engine client (Elasticsearch): calls awaited directly, reconnecting per request."""

    def __init__(self, client: Any, timeout_s: float) -> None:
        super().__init__(timeout_s)
        self._client = client

    async def search(self, query: Mapping[int, float], k: int, explain: bool) -> list[Hit]:
        return await self._bounded(lambda: self._client.search(dict(query), k=k, explain=explain), "search")

    async def get(self, doc_id: str) -> TermDocument:
        return await self._bounded(lambda: self._client.get(doc_id), "get")

    async def count(self) -> int:
        return await self._bounded(lambda: self._client.count(), "count")

    async def close(self) -> None:
        await self._client.close()


def open_engine(spec: str, timeout_s: float) -> ServiceEngine:
    """The engine a backend spec names; nothing is contacted until the first request."""
    engine, location, name = parse_spec(spec)
    if engine == "elasticsearch":
        try:
            from termindex.elastic import AsyncElasticsearchIndex
        except ImportError as exc:  # the [service] extra carries the client
            raise RuntimeError(
                f"backend {spec!r} needs the Elasticsearch client: pip install 'vsparta[service]'"
            ) from exc
        return AsyncIndexEngine(AsyncElasticsearchIndex(location, name), timeout_s)

    def opener() -> TermIndex:
        from termindex.embedded import EmbeddedIndex

        return EmbeddedIndex(location, create=False)

    return ThreadedEngine(opener, timeout_s)
