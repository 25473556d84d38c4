"""Runner: wires reader -> decoder (worker processes) -> mapper (device) -> writer (thread).

The stages are built by ``stages.Stages`` (builders, so any stage can be swapped). The main thread
owns the device; decoding runs ahead in worker processes and writing lags behind in a thread, both
through bounded queues. A SIGINT/SIGTERM sets a flag: the batch being encoded is finished and
written, decoded-but-unencoded items are discarded (``--resume`` redoes them), everything queued is
flushed, and the job exits with 128 + the signal number.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

from vsparta.indexer.batch import TermBatch
from vsparta.indexer.config import MODEL_TOP_N, IndexConfig, check_needs, resolve_top_n
from vsparta.indexer.decoder import Decoded, DecodePool
from vsparta.indexer.failures import FailureReport
from vsparta.indexer.items import Failure, Held, WorkItem, shard_of
from vsparta.indexer.mapper import ImageTermEncoder
from vsparta.indexer.progress import Progress
from vsparta.indexer.reader import detect_format
from vsparta.indexer.stages import Mapper, Stages
from vsparta.indexer.summary import IndexSummary
from vsparta.indexer.writer import DocumentWriter, Sink, chunked, writing
from vsparta.termindex import TermIndex

log = logging.getLogger(__name__)

__all__ = ["MODEL_TOP_N", "IndexConfig", "IndexJob", "IndexSummary", "Stages", "resolve_top_n", "run_index"]

RESUME_CHECK_CHUNK = 512
COMMIT_DOCS = 256  # documents per engine write when the writer has a backlog


@contextlib.contextmanager
def stop_on_signals(stop: threading.Event, caught: list[int]) -> Iterator[None]:
    """SIGINT/SIGTERM ask for a clean stop; a second one of them kills the job the usual way."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: Any) -> None:
        if stop.is_set():
            signal.signal(signum, signal.SIG_DFL)
            signal.raise_signal(signum)
            return
        caught.append(signum)
        stop.set()
        log.warning("%s received: finishing the current batch, then stopping", signal.Signals(signum).name)

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


class ResumeMismatch(ValueError):
    """``--resume`` found another input's document under an id of this input (another image or
    captions under a manifest's id): skipping it would leave the wrong document, writing it would
    lose the other one, so the job stops and says so (exit 2; what it wrote is this input's)."""

    def __init__(self, items: list[WorkItem], source: object) -> None:
        first, more = items[0], len(items) - 1
        also = f", and {more} more id{'s' if more > 1 else ''} in the same stretch" if more else ""
        super().__init__(
            f"--resume: the target holds another document under the id {first.id!r} of {source} "
            f"({first.location}; its metadata differs from this input's{also}): "
            "index this input into a target of its own, or rerun without --resume to replace them"
        )


class PruneLimit(ValueError):
    """``--prune`` would delete more documents than ``--max-delete`` allows: none is deleted and
    the job stops (exit 2; what it wrote stays). An input folder half unmounted, or another folder
    than the target's, looks like this."""

    def __init__(self, count: int, limit: int, source: object) -> None:
        super().__init__(
            f"--prune would remove {count} document(s) that {source} no longer lists, more than "
            f"--max-delete {limit}: none was removed (the rest of the job is done); check the input, "
            "or raise --max-delete"
        )


class IndexJob:
    """One run of the pipeline, its stages built by ``stages`` (default: ``Stages()``).

    ``encoder``/``index``: a loaded model or an open index in place of building one (benchmarks).
    """

    def __init__(
        self,
        config: IndexConfig,
        *,
        stages: Stages | None = None,
        encoder: ImageTermEncoder | None = None,
        index: TermIndex | None = None,
    ):
        config.validate()
        self.config = config
        self.stages = (stages or Stages()).using(encoder=encoder, index=index)
        self.stop = threading.Event()
        self.summary = IndexSummary()
        self.listed: set[str] | None = set() if config.prune else None  # --prune: this shard's ids

    def run(self) -> IndexSummary:
        cfg, stages = self.config, self.stages
        start = time.perf_counter()
        fmt = detect_format(cfg.input) if cfg.input_format == "auto" else cfg.input_format
        # What the format needs (a --model ...) is said now, before the model loads or the walk starts.
        check_needs(cfg, fmt, encoder_given=not stages.loads_model)
        listing = stages.reader(cfg, fmt)
        log.info("listing %s (%s input, shard %d/%d)", cfg.input, fmt, cfg.shard, cfg.num_shards)

        with contextlib.ExitStack() as resources:
            # The model first: a bad --model must not leave an empty index folder behind.
            # Decode workers start now (spawning costs seconds) and warm up while the model loads.
            pool = resources.enter_context(DecodePool(cfg.workers if fmt != "terms" else 0))
            mapper = stages.encoder(cfg, fmt)
            decoder = None if mapper.encoder is None else stages.decoder(cfg, mapper.encoder, pool)
            sinks = resources.enter_context(stages.writer(cfg, mapper.id_to_token, self.stop))
            if not sinks:
                raise ValueError("the writer stage has no outputs: give --backend and/or --export-jsonl")
            report = FailureReport(cfg.failures)
            resources.callback(report.close)
            bar = Progress(None, cfg.progress)
            resources.callback(bar.close)
            items = self._listed(listing, bar)
            caught: list[int] = []
            # Up to ~2 engine commits of documents may wait: a slow engine gets fewer, larger writes.
            writer = DocumentWriter(
                sinks,
                queue_size=max(4, 2 * COMMIT_DOCS // cfg.batch_size),
                commit_docs=COMMIT_DOCS,
                commit_interval=cfg.commit_interval,
                on_commit=bar.update,
            )
            # report.not_written: documents an engine still refused, one line each
            with report.not_written(), stop_on_signals(self.stop, caught), contextlib.ExitStack() as bulk:
                for sink in sinks:
                    bulk.enter_context(sink.bulk())
                with writing(writer):  # raises the writer's error after the last commit
                    pending = self._pending(items, sinks, bar)
                    stream: Iterable[Decoded] = (
                        (Decoded(it) for it in pending)
                        if decoder is None
                        else decoder.iter_decoded(pending, self.stop)
                    )
                    self._encode_loop(stream, mapper, writer, report, bar)
                if self.listed is not None and not caught and not self.stop.is_set():
                    self._prune(sinks, self.listed)
            if not caught and not self.stop.is_set():
                for sink in sinks:  # complete: force-merge, swap a new version in
                    note = sink.finish()
                    if note:
                        self.summary.engine_notes.append(note)
        s = self.summary
        s.indexed = writer.written
        s.write_seconds, s.commits, s.writer_backlog = writer.seconds, writer.commits, writer.mean_queue_depth
        s.encoded, s.encode_seconds = mapper.images, mapper.seconds
        s.device_busy_seconds = mapper.device_busy_seconds
        if decoder is not None:
            s.decode_workers, s.decoded_chunks_ready = decoder.workers, decoder.mean_ready_chunks
            s.gpu_decode_seconds = decoder.gpu_seconds if decoder.gpu is not None else None
        s.failed, s.failures_by_reason = report.total, dict(report.by_reason)
        s.seconds = time.perf_counter() - start
        if caught:
            s.interrupted_by = signal.Signals(caught[0]).name
        for line in s.lines():
            log.info("%s", line)
        return s

    def _mine(self, item: WorkItem) -> bool:
        return self._mine_id(item.id)

    def _listed(self, listing: Iterator[WorkItem], bar: Progress) -> Iterator[WorkItem]:
        """This shard's items as the walk finds them; the count is the job's total once it ends."""
        found = 0
        self.summary.listing_complete = False
        try:
            for item in listing:
                if self._mine(item):
                    found += 1
                    if self.listed is not None:
                        self.listed.add(item.id)
                    bar.found(found)
                    yield item
            self.summary.listing_complete = True
            bar.listing_done(found)
            log.info("%d items listed", found)
        finally:
            self.summary.total = found

    def _prune(self, sinks: list[Sink], listed: set[str]) -> None:
        """``--prune`` once every document is written: each sink deletes this shard's ids the whole
        listing lacks, the export first (its ids stay a subset of the engine's); more than
        ``--max-delete`` of them stops the job before any is deleted (``PruneLimit``). A document
        whose file failed to decode is listed, so it stays."""
        if not self.summary.listing_complete:  # never on a partial listing
            return
        unlisted = [sink.unlisted(listed, self._mine_id) for sink in sinks]
        gone = set().union(*unlisted)
        limit = self.config.max_delete
        if limit is not None and len(gone) > limit:
            raise PruneLimit(len(gone), limit, self.config.input)
        for sink, ids in reversed(list(zip(sinks, unlisted, strict=True))):
            sink.remove(ids)
        self.summary.removed = len(gone)

    def _mine_id(self, doc_id: str) -> bool:
        return self.config.num_shards == 1 or shard_of(doc_id, self.config.num_shards) == self.config.shard

    def _pending(self, items: Iterable[WorkItem], sinks: list[Sink], bar: Progress) -> Iterator[WorkItem]:
        """Items still to do; with --resume, those every sink already holds as given are counted and
        skipped, those whose file changed since are counted and written again, and another input's
        document under one of the ids stops the job (``ResumeMismatch``).

        Checked in chunks of the listing's order, so the memory is one chunk, whatever the input.
        """
        if not self.config.resume:
            yield from items
            return
        for chunk in chunked(items, RESUME_CHECK_CHUNK):
            if self.stop.is_set():
                return
            held = [sink.existing(chunk) for sink in sinks]
            if other := [it for it in chunk if any(h.get(it.id) is Held.OTHER for h in held)]:
                raise ResumeMismatch(other, self.config.input)
            done = {it.id for it in chunk if all(h.get(it.id) is Held.AS_GIVEN for h in held)}
            self.summary.changed += sum(any(h.get(it.id) is Held.CHANGED for h in held) for it in chunk)
            if done:
                self.summary.skipped += len(done)
                bar.update(len(done))
            for item in chunk:
                if item.id not in done:
                    yield item

    def _encode_loop(
        self,
        stream: Iterable[Decoded],
        mapper: Mapper,
        writer: DocumentWriter,
        report: FailureReport,
        bar: Progress,
    ) -> None:
        batch: list[Decoded] = []

        def hand_over(result: tuple[list[TermBatch], list[Failure]]) -> None:
            ready, failures = result
            for f in failures:
                report.add(f)
            if failures:
                bar.update(len(failures))
            for b in ready:
                writer.put(b)

        def flush() -> None:
            hand_over(mapper.map(batch))
            batch.clear()

        for decoded in stream:
            if decoded.failure is not None:
                report.add(decoded.failure)
                bar.update(1)
            else:
                batch.append(decoded)
                self.summary.decoded += 1
                self.summary.decode_seconds += decoded.seconds
            if len(batch) >= self.config.batch_size:
                flush()
            if self.stop.is_set():
                batch.clear()  # decoded but not encoded: redone by --resume
                break
            writer.raise_if_failed()
        else:
            if batch:
                flush()
        hand_over(mapper.drain())  # the batch still on the device is finished and written


def run_index(config: IndexConfig, **kwargs: Any) -> IndexSummary:
    return IndexJob(config, **kwargs).run()
