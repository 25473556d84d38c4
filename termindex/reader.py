"""The read contract: what serving asks of an engine, and the one adapter for synchronous engines.

``TermIndex`` (``base``) is an engine as the indexer sees it: writes and reads, synchronous.
Serving (the HTTP service, ``vsparta search``) only reads, many requests at once: ``AsyncReader``
is that side, every method typed. An engine with an async client implements it itself
(``elastic.index_async``: ``Engine.open_async``); every other engine's ``TermIndex`` runs in
threads through ``ThreadedReader``. ``open_reader`` (``termindex.registry``) picks.

What not every engine has is declared in ``capabilities`` and asked for by membership, never
found by looking for attributes: ``Capability.HEALTH`` (a cluster's green/yellow/red).

"More like this" is no read of its own: the caller already holds the document (it shows it), so
it searches ``base.similar_query`` for k + 1 hits and keeps them ``base.without_self``: one
``get``, one ``search``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from enum import StrEnum
from typing import ClassVar, TypeVar

from vsparta.termindex.base import Hit, TermDocument, TermIndex, TermStatistics
from vsparta.termindex.errors import EngineUnavailable, IndexNotFound, TermIndexError

log = logging.getLogger(__name__)
T = TypeVar("T")

# Threads one synchronous engine may keep busy (anyio's default limit, which the service used
# before): a call that timed out keeps its thread until it finishes.
READ_THREADS = 40


class Capability(StrEnum):
    """An optional ability of a reader, declared in ``AsyncReader.capabilities``."""

    HEALTH = "health"  # ``health()``: the cluster's status for this index


class AsyncReader(ABC):
    """The reads serving needs, async. Errors are ``termindex.errors`` exceptions only."""

    capabilities: ClassVar[frozenset[Capability]] = frozenset()

    @abstractmethod
    async def search(self, query: Mapping[int, float], k: int, explain: bool) -> list[Hit]:
        """``TermIndex.search``: top-k by score, ties by id; ``explain`` fills ``Hit.contributions``."""

    @abstractmethod
    async def get(self, doc_id: str) -> TermDocument:
        """One document; ``DocumentNotFound`` when there is none."""

    @abstractmethod
    async def count(self) -> int:
        """Live documents."""

    @abstractmethod
    async def term_statistics(self, term_ids: Sequence[int]) -> TermStatistics:
        """Documents in the index and, per term, how many hold it (``TermIndex.term_statistics``)."""

    async def health(self) -> str:
        """green, yellow (answers complete, a replica missing) or red (a primary missing): only
        with ``Capability.HEALTH``."""
        raise NotImplementedError(f"{type(self).__name__} declares no {Capability.HEALTH} capability")

    async def start(self) -> None:  # noqa: B027 - optional hook
        """Called once before serving, without a time limit (open, warm up, repair)."""

    @abstractmethod
    async def close(self) -> None:
        """Release connections, files and threads."""


class ThreadedReader(AsyncReader):
    """A synchronous ``TermIndex`` as an ``AsyncReader``: each call in a worker thread.

    Opened lazily (``opener``), so serving can start before the index exists; opening runs once,
    as one task, and warms the index up (``TermIndex.warmup``: the embedded engine compiles its
    kernels at first use). A call waits at most ``open_wait_s`` (None: as long as it takes) for
    that: longer is ``EngineUnavailable``, and the next call waits on the same opening. A missing
    index (``FileNotFoundError``) is ``IndexNotFound``, and the next call tries again.
    """

    def __init__(
        self, opener: Callable[[], TermIndex], open_wait_s: float | None = None, warm: bool = True
    ) -> None:
        self._opener = opener
        self._open_wait_s = open_wait_s
        self._warm = warm
        self._index: TermIndex | None = None
        self._opening: asyncio.Future[TermIndex] | None = None
        self._threads: ThreadPoolExecutor | None = None

    def _open(self) -> TermIndex:
        index = self._opener()
        if self._warm:
            try:
                index.warmup()
            except TermIndexError as exc:  # an empty or odd index still serves; say why it is cold
                log.info("index warm-up skipped: %s", exc)
        return index

    async def _thread(self, call: Callable[[], T]) -> T:
        if self._threads is None:
            self._threads = ThreadPoolExecutor(READ_THREADS, thread_name_prefix="termindex-read")
        # A cancelled wait (a caller's timeout) leaves the thread to finish; the caller moves on.
        return await asyncio.get_running_loop().run_in_executor(self._threads, call)

    async def _opened(self, wait_s: float | None) -> TermIndex:
        if self._index is not None:
            return self._index
        if self._opening is None:
            self._opening = asyncio.ensure_future(self._thread(self._open))
        opening = self._opening
        try:
            index = await asyncio.wait_for(asyncio.shield(opening), timeout=wait_s)
        except TimeoutError:
            raise EngineUnavailable(
                "search index is still opening (first use compiles its kernels)"
            ) from None
        except FileNotFoundError as exc:
            self._opening = None  # try again on the next call
            raise IndexNotFound(str(exc)) from exc
        except BaseException:
            if opening.done():
                self._opening = None
            raise
        self._index = index
        return index

    async def _call(self, call: Callable[[TermIndex], T]) -> T:
        index = await self._opened(self._open_wait_s)
        return await self._thread(lambda: call(index))

    async def start(self) -> None:
        await self._opened(None)

    async def search(self, query: Mapping[int, float], k: int, explain: bool) -> list[Hit]:
        weights = dict(query)
        return await self._call(lambda index: index.search(weights, k=k, explain=explain))

    async def get(self, doc_id: str) -> TermDocument:
        return await self._call(lambda index: index.get(doc_id))

    async def count(self) -> int:
        return await self._call(lambda index: index.count())

    async def term_statistics(self, term_ids: Sequence[int]) -> TermStatistics:
        ids = list(term_ids)
        return await self._call(lambda index: index.term_statistics(ids))

    async def close(self) -> None:
        if self._opening is not None and not self._opening.done():
            with contextlib.suppress(BaseException):
                await self._opening
        if self._index is not None:
            await self._thread(self._index.close)
            self._index = None
        self._opening = None
        if self._threads is not None:
            self._threads.shutdown(wait=False)
            self._threads = None
