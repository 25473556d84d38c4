"""Writer stage: a thread that commits document batches to the job's sinks (the engine, then the
JSONL export), in that order.

It runs beside the encoder with a bounded queue so the device never waits on the network or the
disk, and the encoder never races ahead by more than ``queue_size`` batches. Per commit each sink
writes in turn (engine ``upsert_arrays``: one segment, or one bulk request, per commit); a commit
counts as written only after every sink returned, which is what ``--resume`` relies on.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Protocol, TypeVar

from vsparta.indexer.batch import TermBatch
from vsparta.indexer.items import Held, WorkItem, held_as, stamp
from vsparta.termindex import TermIndex

log = logging.getLogger(__name__)
T = TypeVar("T")


class Sink(Protocol):
    """Where committed documents go: what the writer stage is built of (``stages.open_sinks``).

    The engine (``IndexTarget``) and the JSONL export (``termdocs.TermDocExporter``) are two; a job
    may be given others (``stages.Stages.writer``).
    """

    def write(self, batch: TermBatch) -> None:
        """One commit; durable when it returns (what ``--resume`` counts on)."""

    def existing(self, items: Sequence[WorkItem]) -> dict[str, Held]:
        """The ids of ``items`` this sink already holds, each with how it holds the item
        (``items.held_as``: as the input gives it, its file changed since, or another input's
        document). A resumed job skips what every sink holds as given and writes the rest again."""

    def bulk(self) -> contextlib.AbstractContextManager[object]:
        """A mode for the whole job's writes (Elasticsearch: refresh off, restored after)."""

    def finish(self) -> str | None:
        """After a complete (not interrupted) job: housekeeping; a line for the summary, or None."""

    def unlisted(self, listed: set[str], mine: Callable[[str], bool]) -> set[str]:
        """``--prune``, after a complete job: the ids this sink holds that are ``mine`` (this
        shard's) but not ``listed`` by the input."""

    def remove(self, ids: set[str]) -> None:
        """``--prune``: delete these documents (``unlisted``'s, once the job allowed it)."""


class IndexTarget:
    """The engine as the indexer uses it: array writes, bulk-load mode, which ids exist.

    All are ``TermIndex`` methods with portable defaults that engines override
    (``upsert_arrays``: a vectorized write; ``bulk_load``: e.g. ES refresh off; ``existing_ids``:
    a realtime ``_mget`` or id lookups in one snapshot; ``finish_load``: a force-merge).
    """

    def __init__(self, index: TermIndex) -> None:
        self.index = index

    def existing(self, items: Sequence[WorkItem]) -> dict[str, Held]:
        """Held ids (realtime: sees unrefreshed ES writes), compared by their stored metadata."""
        given = {it.id: it.metadata for it in items}
        stored = self.index.existing_metadata(list(given))
        return {i: held_as(stamp(meta), stamp(given[i])) for i, meta in stored.items()}

    def bulk(self) -> contextlib.AbstractContextManager[object]:
        """The engine's bulk-load mode for the whole job."""
        return self.index.bulk_load()

    def write(self, batch: TermBatch) -> None:
        """One commit; durable when it returns (what ``--resume`` counts on)."""
        self.index.upsert_arrays(batch.ids, batch.indptr, batch.term_ids, batch.weights, batch.metadata)

    def finish(self) -> str | None:
        """A complete load's end: force-merge, swap a new version in."""
        return self.index.finish_load()

    def unlisted(self, listed: set[str], mine: Callable[[str], bool]) -> set[str]:
        """This shard's stored ids the input no longer lists (the engine's ``iter_ids``: an engine
        that cannot list its ids cannot be pruned)."""
        return {i for i in self.index.iter_ids() if i not in listed and mine(i)}

    def remove(self, ids: set[str]) -> None:
        """One ``delete`` of them all."""
        if ids:
            self.index.delete(sorted(ids))


_DONE = object()


class DocumentWriter(threading.Thread):
    """Consumes batches from a bounded queue; ``on_commit(n)`` is called after each batch lands."""

    def __init__(
        self,
        sinks: Sequence[Sink],
        *,
        queue_size: int = 4,
        commit_docs: int = 256,
        commit_interval: float = 1.0,
        on_commit: Callable[[int], None] | None = None,
    ) -> None:
        super().__init__(name="indexer-writer", daemon=True)
        self.sinks = list(sinks)
        self.on_commit = on_commit
        self.commit_docs = commit_docs
        self.commit_interval = commit_interval
        self._queue: queue.Queue[object] = queue.Queue(maxsize=max(1, queue_size))
        self.error: BaseException | None = None
        self.written = 0
        self.seconds = 0.0
        self.commits = 0
        self.queue_samples = 0
        self.queue_total = 0  # batches waiting, summed over puts (how far the writer lags)

    @property
    def mean_queue_depth(self) -> float | None:
        return self.queue_total / self.queue_samples if self.queue_samples else None

    def _next(self) -> tuple[TermBatch | None, bool]:
        """One batch, merged with what arrives within ``commit_interval``, up to ``commit_docs``.

        Small encoder batches become fewer, larger engine writes (one segment or one bulk
        request each); a document waits at most ``commit_interval`` seconds for company.
        """
        item = self._queue.get()
        if item is _DONE:
            return None, True
        assert isinstance(item, TermBatch)
        parts = [item]
        size = len(item)
        deadline = time.monotonic() + self.commit_interval
        done = False
        while size < self.commit_docs:
            try:
                item = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if item is _DONE:
                done = True
                break
            assert isinstance(item, TermBatch)
            parts.append(item)
            size += len(item)
        return TermBatch.concat(parts), done

    def run(self) -> None:
        done = False
        while not done:
            batch, done = self._next()
            if batch is None or not len(batch) or self.error is not None:
                continue  # after an error: drain so the producer never blocks on a dead writer
            try:
                start = time.perf_counter()
                for sink in self.sinks:
                    sink.write(batch)
                self.seconds += time.perf_counter() - start
                self.written += len(batch)
                self.commits += 1
                log.debug("committed %d documents (%d in total)", len(batch), self.written)
                if self.on_commit is not None:
                    self.on_commit(len(batch))
            except BaseException as exc:  # noqa: BLE001 - re-raised in the main thread
                self.error = exc

    def put(self, batch: TermBatch) -> None:
        """Queue a batch; raises the writer's error instead of blocking on a dead writer."""
        self.queue_samples += 1
        self.queue_total += self._queue.qsize()
        while True:
            self.raise_if_failed()
            try:
                self._queue.put(batch, timeout=0.2)
                return
            except queue.Full:
                continue

    def raise_if_failed(self) -> None:
        """Re-raise the writer's error in the caller's thread, keeping its type (engine errors)."""
        if self.error is not None:
            raise self.error

    def finish(self) -> None:
        """Write everything queued, then stop the thread."""
        self._queue.put(_DONE)
        self.join()


@contextlib.contextmanager
def writing(writer: DocumentWriter) -> Iterator[DocumentWriter]:
    """Start the writer; on exit always drain and join it so queued batches are never lost, then
    raise what the writer failed on (the last commit's error shows only after the drain)."""
    writer.start()
    try:
        yield writer
    finally:
        writer.finish()
    writer.raise_if_failed()


def chunked(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """Lists of ``size`` consecutive items (the last one shorter), taken lazily."""
    chunk: list[T] = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
