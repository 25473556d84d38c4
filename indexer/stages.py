"""The indexing job's stages as builders, so that any one of them can be swapped.

Like clip-retrieval's ``Runner`` (given a reader, mapper and writer builder), ``IndexJob`` is given
a ``Stages``: four functions it calls once per job with its ``IndexConfig``, in this order (the model
loads before any engine is opened: a bad ``--model`` leaves no empty index behind):

- ``reader(config, fmt)``: the work items of the input (``indexer.reader``), lazily;
- ``encoder(config, fmt)``: the mapper stage, the model or the tokenizer of term documents
  (``indexer.mapper``); it carries ``id_to_token`` for the export and ``encoder``, whose
  preprocessing the decoder is built with (None for term documents, which are not decoded);
- ``decoder(config, encoder, pool)``: the decode stage on the job's worker processes
  (``indexer.decoder``);
- ``writer(config, id_to_token, stop)``: a context manager giving the sinks each commit goes to
  (``indexer.writer.Sink``: the engine the parsed ``config.backend`` names, the JSONL export), closed
  when the job ends.

``Stages().using(encoder=..., index=...)`` puts a loaded model or an open index in place of
building one (benchmarks, tests).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from vsparta.indexer.config import IndexConfig, resolve_top_n
from vsparta.indexer.decoder import DecodePool, Decoder
from vsparta.indexer.items import WorkItem
from vsparta.indexer.mapper import EncoderMapper, ImageTermEncoder, TermsMapper
from vsparta.indexer.reader import iter_items
from vsparta.indexer.termdocs import TermDocExporter
from vsparta.indexer.writer import IndexTarget, Sink
from vsparta.termindex import IndexNotFound, TermIndex, open_index
from vsparta.termindex.plugin import BackendSpec

log = logging.getLogger(__name__)

SHARD_WAIT_SECONDS = 600.0  # how long shards 1..N-1 wait for shard 0 to create the index

Mapper = EncoderMapper | TermsMapper
ReaderBuilder = Callable[[IndexConfig, str], Iterator[WorkItem]]
EncoderBuilder = Callable[[IndexConfig, str], Mapper]
DecoderBuilder = Callable[[IndexConfig, ImageTermEncoder, DecodePool], Decoder]
WriterBuilder = Callable[
    [IndexConfig, Callable[[int], str], threading.Event], contextlib.AbstractContextManager[list[Sink]]
]


def read_input(config: IndexConfig, fmt: str) -> Iterator[WorkItem]:
    """The input's work items in their stable order (a folder is walked as the job goes)."""
    return iter_items(
        config.input, fmt, ignore_regions=config.ignore_regions, follow_symlinks=config.follow_symlinks
    )


def load_encoder(config: IndexConfig) -> ImageTermEncoder:
    """The model ``--model`` names, or the fake encoder."""
    if config.fake_encoder:
        from vsparta.indexer.fake import FakeEncoder

        return FakeEncoder(image_size=config.fake_image_size)
    if config.model is None:
        raise ValueError("--model (or --fake-encoder) is required to encode images or regions")
    if not config.model.is_dir():
        raise ValueError(f"--model {config.model}: no such model folder")
    from vsparta.model.encode import TermEncoder

    return TermEncoder.from_pretrained(config.model, device=config.device, amp=config.amp)


def build_mapper(config: IndexConfig, fmt: str, *, encoder: ImageTermEncoder | None = None) -> Mapper:
    """The encoder stage: the model on the device (``encoder`` when given, else loaded), or, for
    term documents, the tokenizer mapping tokens back to ids."""
    if fmt == "terms":
        from vsparta.model.query_tokenizer import QueryTokenizer

        path = config.tokenizer or config.model
        if path is None:
            raise ValueError("term-document input needs --tokenizer (or --model) to map tokens to ids")
        tok = QueryTokenizer.from_pretrained(path)
        top_n = resolve_top_n(config.top_n, None)
        return TermsMapper(tok.token_to_id, tok.id_to_token, top_n, config.min_weight)
    if encoder is None:
        encoder = load_encoder(config)
    return EncoderMapper(encoder, resolve_top_n(config.top_n, encoder), config.min_weight)


def build_decoder(config: IndexConfig, encoder: ImageTermEncoder, pool: DecodePool) -> Decoder:
    """The decode stage, built with the encoder's preprocessing and, on CUDA, its GPU decoder."""
    from vsparta.indexer.gpu_decode import gpu_decoder_for

    return Decoder(
        encoder.preprocessor,
        pool,
        max_pixels=config.max_pixels,
        fast_decode=config.fast_decode,
        gpu=gpu_decoder_for(encoder, False if config.fake_encoder else config.gpu_decode),
        gpu_batch=config.batch_size,
    )


def open_backend(
    spec: BackendSpec,
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


@contextlib.contextmanager
def open_sinks(
    config: IndexConfig,
    id_to_token: Callable[[int], str],
    stop: threading.Event,
    *,
    index: TermIndex | None = None,
) -> Iterator[list[Sink]]:
    """The engine (``index`` when given, left open; else the one ``config.backend`` names, closed
    at the end), then the JSONL export: the order every commit is written in."""
    with contextlib.ExitStack() as opened:
        sinks: list[Sink] = []
        if index is None and config.backend is not None:
            spec, options = config.backend, config.backend_options
            index = opened.enter_context(open_backend(spec, config.shard, config.num_shards, stop, **options))
        if index is not None:
            sinks.append(IndexTarget(index))
        if config.export_jsonl is not None:
            exporter = TermDocExporter(
                config.export_jsonl,
                id_to_token,
                shard=config.shard,
                num_shards=config.num_shards,
                docs_per_file=config.export_docs_per_file,
                resume=config.resume,
            )
            opened.callback(exporter.close)
            sinks.append(exporter)
        yield sinks


@dataclass(frozen=True)
class Stages:
    """How a job builds its stages (the module docstring says when each is called, with what)."""

    reader: ReaderBuilder = read_input
    encoder: EncoderBuilder = build_mapper
    decoder: DecoderBuilder = build_decoder
    writer: WriterBuilder = open_sinks

    def using(self, *, encoder: ImageTermEncoder | None = None, index: TermIndex | None = None) -> Stages:
        """These stages with a loaded ``encoder`` and/or an open ``index`` (not closed by the job)."""
        stages = self
        if encoder is not None:
            stages = replace(stages, encoder=functools.partial(build_mapper, encoder=encoder))
        if index is not None:
            stages = replace(stages, writer=functools.partial(open_sinks, index=index))
        return stages

    @property
    def loads_model(self) -> bool:
        """The encoder stage is the default one, which needs ``--model`` or ``--fake-encoder``."""
        return self.encoder is build_mapper
