"""Runner: wires reader -> decoder (worker processes) -> mapper (device) -> writer (thread).

The main thread owns the device; decoding runs ahead in worker processes and writing lags
behind in a thread, both through bounded queues. A SIGINT/SIGTERM sets a flag: the batch being
encoded is finished and written, decoded-but-unencoded items are discarded (``--resume`` redoes
them), everything queued is flushed, and the job exits with 128 + the signal number.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from vsparta.indexer.batch import TermBatch
from vsparta.indexer.decoder import Decoded, DecodePool, Decoder
from vsparta.indexer.failures import FailureReport
from vsparta.indexer.items import Failure, WorkItem, shard_of, validate_shard
from vsparta.indexer.mapper import EncoderMapper, ImageTermEncoder, TermsMapper
from vsparta.indexer.progress import Progress
from vsparta.indexer.reader import INPUT_FORMATS, detect_format, iter_items
from vsparta.indexer.summary import IndexSummary
from vsparta.indexer.termdocs import TermDocExporter
from vsparta.indexer.writer import DocumentWriter, IndexTarget, chunked, writing
from vsparta.model.config_parts import DEFAULT_TOP_N
from vsparta.termindex import IndexNotFound, TermIndex, open_index

log = logging.getLogger(__name__)

__all__ = ["IndexConfig", "IndexJob", "IndexSummary", "open_backend", "run_index"]

RESUME_CHECK_CHUNK = 512
SHARD_WAIT_SECONDS = 600.0  # how long shards 1..N-1 wait for shard 0 to create the index
COMMIT_DOCS = 256  # documents per engine write when the writer has a backlog


MODEL_TOP_N = "model"  # IndexConfig.top_n when --top-n is not given: the model config's


@dataclass
class IndexConfig:
    """Everything one indexing job needs; the CLI fills it from flags."""

    input: Path
    input_format: str = "auto"
    backend: str | None = None
    export_jsonl: Path | None = None
    export_docs_per_file: int = 10_000
    model: Path | None = None
    tokenizer: Path | None = None
    top_n: int | None | Literal["model"] = MODEL_TOP_N  # "model": the model config's top_n
    min_weight: float = 0.0  # terms lighter than this are not indexed (a row's heaviest always is)
    batch_size: int = 32
    workers: int = 1
    device: str = "auto"
    amp: bool | None = None
    resume: bool = False
    shard: int = 0
    num_shards: int = 1
    failures: Path | None = None
    max_pixels: int | None = None
    ignore_regions: bool = False
    commit_interval: float = 1.0  # seconds a document may wait to share an engine write
    progress: bool | None = None  # None/True: a bar on a terminal, log lines otherwise; False: nothing
    fast_decode: bool = True  # JPEG draft mode + reducing_gap resize (see indexer.decoder)
    follow_symlinks: bool = False  # index links whose target lies outside the input folder
    gpu_decode: bool | None = None  # nvJPEG for plain JPEGs; None: when the device is CUDA with torchvision
    fake_encoder: bool = False  # instant deterministic terms, no model: measures the plumbing
    fake_image_size: int = 224
    backend_options: dict[str, Any] = field(default_factory=dict)  # engine options (--shards ...)

    def validate(self) -> None:
        if self.fake_encoder and self.model is not None:
            raise ValueError("give either --model or --fake-encoder, not both")
        if self.fake_image_size < 1:
            raise ValueError(f"--fake-image-size must be >= 1, got {self.fake_image_size}")
        if self.backend is None and self.export_jsonl is None:
            raise ValueError("nothing to write to: give --backend and/or --export-jsonl")
        if self.input_format not in INPUT_FORMATS:
            raise ValueError(f"--format must be one of {INPUT_FORMATS}, got {self.input_format!r}")
        if self.batch_size < 1:
            raise ValueError(f"--batch-size must be >= 1, got {self.batch_size}")
        if self.workers < 0:
            raise ValueError(f"--workers must be >= 0, got {self.workers}")
        if not 0 <= self.commit_interval <= 3600:
            raise ValueError(f"--commit-interval must be in [0, 3600] seconds, got {self.commit_interval}")
        if self.max_pixels is not None and self.max_pixels < 1:
            raise ValueError(f"--max-pixels must be >= 1, got {self.max_pixels}")
        if self.device not in {"auto", "cpu", "cuda"} and not self.device.startswith("cuda:"):
            raise ValueError(f"--device must be auto, cpu or cuda, got {self.device!r}")
        validate_shard(self.shard, self.num_shards)


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


def check_needs(config: IndexConfig, fmt: str, *, encoder_given: bool = False) -> None:
    """What this input format needs from the options: raised before any model loads."""
    if fmt == "terms":
        if config.tokenizer is None and config.model is None:
            raise ValueError("term-document input needs --tokenizer (or --model) to map tokens to ids")
    elif config.model is None and not config.fake_encoder and not encoder_given:
        raise ValueError("--model (or --fake-encoder) is required to encode images or regions")


def resolve_top_n(top_n: int | None | str, encoder: object) -> int | None:
    """``--top-n`` as given, or when not given (``MODEL_TOP_N``) the model config's ``top_n``
    (``DEFAULT_TOP_N`` for inputs without a model: term documents, the fake encoder)."""
    if top_n != MODEL_TOP_N:
        return top_n  # type: ignore[return-value]
    return getattr(getattr(encoder, "config", None), "top_n", DEFAULT_TOP_N)


def _load_encoder(config: IndexConfig) -> ImageTermEncoder:
    if config.fake_encoder:
        from vsparta.indexer.fake import FakeEncoder

        return FakeEncoder(image_size=config.fake_image_size)
    if config.model is None:
        raise ValueError("--model (or --fake-encoder) is required to encode images or regions")
    if not config.model.is_dir():
        raise ValueError(f"--model {config.model}: no such model folder")
    from vsparta.model.encode import TermEncoder

    return TermEncoder.from_pretrained(config.model, device=config.device, amp=config.amp)


def _tokenizer(config: IndexConfig) -> Any:
    from vsparta.model.query_tokenizer import QueryTokenizer

    path = config.tokenizer or config.model
    if path is None:
        raise ValueError("term-document input needs --tokenizer (or --model) to map tokens to ids")
    return QueryTokenizer.from_pretrained(path)


def open_backend(
    spec: str,
    shard: int,
    num_shards: int,
    stop: threading.Event | None = None,
    wait: float = SHARD_WAIT_SECONDS,
    **options: Any,
) -> TermIndex:
    """Open the target; with several shards only shard 0 creates it, the others wait for it.

    N jobs started at once must not each create the index (for Elasticsearch each would make
    its own version behind the alias); one creator makes the result the same as one job's.
    """
    if num_shards == 1 or shard == 0:
        return open_index(spec, create=True, **options)
    deadline = time.monotonic() + wait
    logged = 0.0
    while True:
        try:
            return open_index(spec, **options)
        except IndexNotFound:
            now = time.monotonic()
            if now > deadline or (stop is not None and stop.is_set()):
                raise IndexNotFound(
                    f"{spec} does not exist: shard 0 creates it; start shard 0 (or create the index) first"
                ) from None
            if now - logged > 10:
                log.info("waiting for shard 0 to create %s", spec)
                logged = now
            time.sleep(0.5)


class IndexJob:
    """One run of the pipeline. Pass ``encoder``/``index`` to reuse loaded ones (benchmarks)."""

    def __init__(
        self, config: IndexConfig, *, encoder: ImageTermEncoder | None = None, index: TermIndex | None = None
    ):
        config.validate()
        self.config = config
        self._encoder = encoder
        self._index = index
        self.stop = threading.Event()
        self.summary = IndexSummary()

    def run(self) -> IndexSummary:
        cfg = self.config
        start = time.perf_counter()
        fmt = detect_format(cfg.input) if cfg.input_format == "auto" else cfg.input_format
        # What the format needs (a --model ...) is said now, before the model loads or the walk starts.
        check_needs(cfg, fmt, encoder_given=self._encoder is not None)
        listing = iter_items(
            cfg.input, fmt, ignore_regions=cfg.ignore_regions, follow_symlinks=cfg.follow_symlinks
        )
        log.info("listing %s (%s input, shard %d/%d)", cfg.input, fmt, cfg.shard, cfg.num_shards)

        with contextlib.ExitStack() as resources:
            # The model first: a bad --model must not leave an empty index folder behind.
            # Decode workers start now (spawning costs seconds) and warm up while the model loads.
            pool = resources.enter_context(DecodePool(cfg.workers if fmt != "terms" else 0))
            mapper, id_to_token, encoder = self._mapper(fmt)
            decoder = None if encoder is None else self._decoder(encoder, pool)
            index = self._index
            if index is None and cfg.backend is not None:
                index = resources.enter_context(
                    open_backend(cfg.backend, cfg.shard, cfg.num_shards, self.stop, **cfg.backend_options)
                )
            target = IndexTarget(index) if index is not None else None
            exporter = None
            if cfg.export_jsonl is not None:
                exporter = TermDocExporter(
                    cfg.export_jsonl,
                    id_to_token,
                    shard=cfg.shard,
                    num_shards=cfg.num_shards,
                    docs_per_file=cfg.export_docs_per_file,
                    resume=cfg.resume,
                )
                resources.callback(exporter.close)
            report = FailureReport(cfg.failures)
            resources.callback(report.close)
            bar = Progress(None, cfg.progress)
            resources.callback(bar.close)
            items = self._listed(listing, bar)
            caught: list[int] = []
            # Up to ~2 engine commits of documents may wait: a slow engine gets fewer, larger writes.
            writer = DocumentWriter(
                target,
                exporter,
                queue_size=max(4, 2 * COMMIT_DOCS // cfg.batch_size),
                commit_docs=COMMIT_DOCS,
                commit_interval=cfg.commit_interval,
                on_commit=bar.update,
            )
            with (
                report.not_written(),  # documents the engine still refused: one line each
                stop_on_signals(self.stop, caught),
                target.bulk() if target is not None else contextlib.nullcontext(),
                writing(writer),  # raises the writer's error after the last commit
            ):
                pending = self._pending(items, target, exporter, bar)
                stream: Iterable[Decoded] = (
                    (Decoded(it) for it in pending)
                    if decoder is None
                    else decoder.iter_decoded(pending, self.stop)
                )
                self._encode_loop(stream, mapper, writer, report, bar)
            if index is not None and not caught and not self.stop.is_set():
                note = index.finish_load()  # complete: force-merge, swap a new version in
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
        return self.config.num_shards == 1 or shard_of(item.id, self.config.num_shards) == self.config.shard

    def _listed(self, listing: Iterator[WorkItem], bar: Progress) -> Iterator[WorkItem]:
        """This shard's items as the walk finds them; the count is the job's total once it ends."""
        found = 0
        self.summary.listing_complete = False
        try:
            for item in listing:
                if self._mine(item):
                    found += 1
                    bar.found(found)
                    yield item
            self.summary.listing_complete = True
            bar.listing_done(found)
            log.info("%d items listed", found)
        finally:
            self.summary.total = found

    def _mapper(self, fmt: str) -> tuple[EncoderMapper | TermsMapper, Callable[[int], str], Any]:
        """The mapper, the id -> token function, and the encoder (None for term-document input)."""
        cfg = self.config
        if fmt == "terms":
            tok = _tokenizer(cfg)
            return (
                TermsMapper(tok.token_to_id, resolve_top_n(cfg.top_n, None), cfg.min_weight),
                tok.id_to_token,
                None,
            )
        encoder = self._encoder if self._encoder is not None else _load_encoder(cfg)
        return (
            EncoderMapper(encoder, resolve_top_n(cfg.top_n, encoder), cfg.min_weight),
            encoder.id_to_token,
            encoder,
        )

    def _decoder(self, encoder: ImageTermEncoder, pool: DecodePool) -> Decoder:
        """The decode stage, built with the encoder's preprocessing and, on CUDA, its GPU decoder."""
        from vsparta.indexer.gpu_decode import gpu_decoder_for

        cfg = self.config
        return Decoder(
            encoder.preprocessor,
            pool,
            max_pixels=cfg.max_pixels,
            fast_decode=cfg.fast_decode,
            gpu=gpu_decoder_for(encoder, False if cfg.fake_encoder else cfg.gpu_decode),
            gpu_batch=cfg.batch_size,
        )

    def _pending(
        self,
        items: Iterable[WorkItem],
        target: IndexTarget | None,
        exporter: TermDocExporter | None,
        bar: Progress,
    ) -> Iterator[WorkItem]:
        """Items still to do; with --resume, those already committed are counted and skipped.

        Checked in chunks of the listing's order, so the memory is one chunk, whatever the input.
        """
        if not self.config.resume:
            yield from items
            return
        for chunk in chunked(items, RESUME_CHECK_CHUNK):
            if self.stop.is_set():
                return
            ids = [it.id for it in chunk]
            done = target.existing(ids) if target is not None else set(ids)
            if exporter is not None:
                done &= exporter.ids
            if done:
                self.summary.skipped += len(done)
                bar.update(len(done))
            for item in chunk:
                if item.id not in done:
                    yield item

    def _encode_loop(
        self,
        stream: Iterable[Decoded],
        mapper: EncoderMapper | TermsMapper,
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
