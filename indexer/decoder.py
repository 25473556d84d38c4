"""Decoder stage: file -> model input, in worker processes so the device never waits on JPEG.

Workers are started with the ``spawn`` method (safe beside torch and CUDA, the same on every
OS); each task carries the picklable preprocessor and a chunk of items, so workers hold no
state. At most ``prefetch`` chunks are in flight: memory stays bounded however large the input.
A file that cannot be read becomes a ``Failure``, never an exception that stops the job.

Bytes, not floats, cross the process boundary: a worker returns its chunk's pictures as ONE
uint8 ``[n, S, S, 3]`` array (150 KB per 224 px image instead of 600 KB of float32 per image
pickled one by one); normalization happens where the model runs. JPEGs are decoded in draft
mode (libjpeg's 1/2, 1/4, 1/8 DCT scaling straight to near the model's size) unless
``fast_decode`` is off; see ``vsparta.core.images.load_image``.

The decoder is built with the encoder's preprocessing (``ImagePreprocessor``) and, on CUDA, its
GPU JPEG decoder: workers then hand plain JPEGs over as bytes, the main thread decodes them in
batches of ``gpu_batch`` on the device, and a file nvJPEG refuses is decoded on the CPU here, so
every item leaves this stage as pixels (host array or device tensor) or a ``Failure``. The
worker processes (``DecodePool``) are started before the model loads; they hold no state.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from itertools import islice
from typing import TYPE_CHECKING, Any

import numpy as np

from vsparta.indexer.items import Failure, WorkItem

if TYPE_CHECKING:
    from vsparta.indexer.gpu_decode import GpuJpegDecoder

log = logging.getLogger(__name__)


REDUCING_GAP = 3.0  # Pillow: reduce by an integer factor, then resample (see ImagePreprocessor.pixels)


@dataclass
class Decoded:
    """One item after decoding: ``payload`` is uint8 pixels ``[S, S, 3]`` (a host array, or a
    device tensor from the GPU decoder) or the Regions, or None on failure (then ``failure`` says
    why). Inside the stage only, ``encoded`` marks a JPEG's bytes waiting for the GPU."""

    item: WorkItem
    payload: Any = None
    failure: Failure | None = None
    seconds: float = 0.0
    encoded: bool = False  # payload is the JPEG file's bytes, for the GPU decoder


@dataclass
class DecodedChunk:
    """What one worker task returns: every item's outcome, the pictures in one array.

    ``pixels[j]`` belongs to ``items[pixel_rows[j]]``; ``others[k]`` holds the payload or failure
    of the other items (regions, failures) by position.
    """

    items: list[WorkItem]
    pixels: np.ndarray | None
    pixel_rows: list[int]
    others: dict[int, Decoded]
    seconds: float

    def decoded(self) -> list[Decoded]:
        """Per-item view in input order; pixel payloads are views into the one chunk array."""
        out: list[Decoded | None] = [None] * len(self.items)
        share = self.seconds / max(1, len(self.items))
        for j, row in enumerate(self.pixel_rows):
            assert self.pixels is not None
            out[row] = Decoded(self.items[row], self.pixels[j], None, share)
        for row, d in self.others.items():
            out[row] = d
        return [d for d in out if d is not None]


def _image_size(path: Any) -> tuple[int, int] | None:
    """Width and height from the header only (for normalizing region boxes given in pixels)."""
    from PIL import Image

    try:
        with Image.open(path) as im:
            return im.size
    except (OSError, ValueError):
        return None


def decode_item(
    item: WorkItem, preprocess: Any, max_pixels: int | None, fast_decode: bool = True, gpu_jpeg: bool = False
) -> Decoded:
    """Decode one item; every error is turned into a Failure with a reason.

    ``preprocess`` is an ``ImagePreprocessor`` (its ``pixels`` gives uint8 ``[S, S, 3]``).
    ``gpu_jpeg``: a plain JPEG is not decoded here; its bytes go to ``vsparta.indexer.gpu_decode``.
    """
    from vsparta.core.images import DEFAULT_MAX_PIXELS, ImageError, load_image

    start = time.perf_counter()
    if item.rejected is not None:  # known bad before any byte was read (e.g. a dangling link)
        reason, message = item.rejected
        return Decoded(item, None, Failure(item.id, item.location, reason, message), 0.0)
    try:
        if item.kind == "regions":
            from vsparta.model.regions import load_regions

            size = _image_size(item.image) if item.image is not None and item.image.exists() else None
            payload: Any = load_regions(item.regions, image_size=size)
        else:
            if preprocess is None:
                raise ValueError("no preprocessor for pixel input")
            if gpu_jpeg and item.rejected is None:
                from vsparta.indexer.gpu_decode import jpeg_for_gpu

                try:
                    data = item.image.read_bytes()
                except OSError:
                    data = b""  # load_image below reports it with the usual reason
                if data and jpeg_for_gpu(data, max_pixels or DEFAULT_MAX_PIXELS):
                    raw = np.frombuffer(data, dtype=np.uint8)
                    return Decoded(item, raw, None, time.perf_counter() - start, encoded=True)
            kwargs: dict[str, Any] = {} if max_pixels is None else {"max_pixels": max_pixels}
            if fast_decode:
                kwargs["draft_size"] = preprocess.image_size
            image = load_image(item.image, **kwargs)
            payload = preprocess.pixels(image, reducing_gap=REDUCING_GAP if fast_decode else None)
        return Decoded(item, payload, None, time.perf_counter() - start)
    except ImageError as exc:
        failure = Failure(item.id, item.location, exc.reason, str(exc))
    except FileNotFoundError as exc:
        failure = Failure(item.id, item.location, "missing", str(exc))
    except Exception as exc:  # noqa: BLE001 - one bad file must never stop the job
        reason = "bad_regions" if item.kind == "regions" else "unreadable"
        failure = Failure(item.id, item.location, reason, f"{type(exc).__name__}: {exc}")
    return Decoded(item, None, failure, time.perf_counter() - start)


def stack_pictures(pictures: list[Any]) -> Any:
    """One uint8 ``[B, S, S, 3]`` batch: a numpy array when every picture is in host memory, else a
    device tensor (host pictures, e.g. PNGs in a GPU-decoded job, are copied to that device)."""
    if all(isinstance(p, np.ndarray) for p in pictures):
        return np.stack(pictures)
    import torch

    device = next(p.device for p in pictures if not isinstance(p, np.ndarray))
    return torch.stack([torch.from_numpy(p).to(device) if isinstance(p, np.ndarray) else p for p in pictures])


def decode_bytes(decoded: Decoded, preprocess: Any, max_pixels: int | None, fast_decode: bool) -> Decoded:
    """A JPEG handed over as bytes, decoded on the CPU after all (nvJPEG refused it)."""
    from vsparta.core.images import DEFAULT_MAX_PIXELS, ImageError, load_image

    item = decoded.item
    try:
        image = load_image(
            bytes(decoded.payload),
            max_pixels=max_pixels or DEFAULT_MAX_PIXELS,
            draft_size=preprocess.image_size if fast_decode else None,
        )
        pixels = preprocess.pixels(image, reducing_gap=REDUCING_GAP if fast_decode else None)
        return Decoded(item, pixels, None, decoded.seconds)
    except ImageError as exc:
        message = str(exc).replace("<bytes>", item.location, 1)
        return Decoded(item, None, Failure(item.id, item.location, exc.reason, message), decoded.seconds)


def decode_chunk(
    items: list[WorkItem],
    preprocess: Any,
    max_pixels: int | None,
    fast_decode: bool = True,
    gpu_jpeg: bool = False,
) -> DecodedChunk:
    start = time.perf_counter()
    pictures: list[np.ndarray] = []
    rows: list[int] = []
    others: dict[int, Decoded] = {}
    for row, it in enumerate(items):
        d = decode_item(it, preprocess, max_pixels, fast_decode, gpu_jpeg)
        if d.failure is None and it.kind == "pixels" and not d.encoded:
            pictures.append(d.payload)
            rows.append(row)
        else:
            others[row] = d
    pixels = np.stack(pictures) if pictures else None
    return DecodedChunk(items, pixels, rows, others, time.perf_counter() - start)


def _worker_init(parent_pid: int) -> None:
    """Ctrl-C reaches the whole process group: let only the parent decide how to stop.

    A parent killed with SIGKILL cannot shut the pool down, and its workers would wait on the
    task queue forever (they hold its write end themselves): a watchdog thread exits the worker
    once it has been re-parented.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_exit_with_parent, args=(parent_pid,), daemon=True).start()


def _warm_up() -> None:
    """Import what decoding needs, so the first real chunk does not pay for it."""
    import vsparta.core.images  # noqa: F401
    import vsparta.model.preprocess  # noqa: F401


def _exit_with_parent(parent_pid: int, interval: float = 1.0) -> None:
    while os.getppid() == parent_pid:
        time.sleep(interval)
    os._exit(1)


def _chunks(items: Iterable[WorkItem], size: int) -> Iterator[list[WorkItem]]:
    it = iter(items)
    while chunk := list(islice(it, size)):
        yield chunk


class DecodePool:
    """The decode worker processes, started before the model loads (spawning costs seconds).

    ``workers=0``: no processes; the decoder then works in the calling thread (debugging, tiny
    jobs, tests).
    """

    def __init__(self, workers: int = 1) -> None:
        if workers < 0:
            raise ValueError(f"--workers must be >= 0, got {workers}")
        self.workers = workers
        self.executor: ProcessPoolExecutor | None = None

    def __enter__(self) -> DecodePool:
        if self.workers > 0:
            ctx = multiprocessing.get_context("spawn")
            self.executor = ProcessPoolExecutor(
                self.workers, mp_context=ctx, initializer=_worker_init, initargs=(os.getpid(),)
            )
            for _ in range(self.workers):  # a pool spawns lazily: start every worker now
                self.executor.submit(_warm_up)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.executor is not None:
            self.executor.shutdown(wait=True, cancel_futures=True)
            self.executor = None


class Decoder:
    """Ordered, bounded, optionally parallel ``items -> Decoded`` stream.

    ``pool`` None (or one of 0 workers) decodes in the calling thread. ``gpu``: plain JPEGs are
    decoded on its device in batches of ``gpu_batch``, with the CPU as the per-file fallback.
    """

    def __init__(
        self,
        preprocess: Any,
        pool: DecodePool | None = None,
        *,
        max_pixels: int | None = None,
        chunk_size: int = 8,
        prefetch: int | None = None,
        fast_decode: bool = True,
        gpu: GpuJpegDecoder | None = None,
        gpu_batch: int = 32,
    ) -> None:
        self.preprocess = preprocess
        self.fast_decode = fast_decode
        self.gpu = gpu
        self.gpu_batch = max(1, gpu_batch)
        self.gpu_seconds = 0.0  # host time of the GPU decode batches (main thread)
        self.gpu_fallbacks = 0  # JPEGs nvJPEG refused, decoded on the CPU instead
        self.busy_seconds = 0.0  # summed over workers: the decode stage's own time
        self.window_samples = 0
        self.window_total = 0  # chunks ready or in flight, summed over samples (queue depth)
        self._executor = pool.executor if pool is not None else None
        self.workers = pool.workers if self._executor is not None else 0
        self.max_pixels = max_pixels
        self.chunk_size = max(1, chunk_size)
        self.prefetch = prefetch or max(2, 4 * self.workers)

    def iter_decoded(
        self, items: Iterable[WorkItem], stop: threading.Event | None = None
    ) -> Iterator[Decoded]:
        """Yield decoded items in input order; stops submitting new work once ``stop`` is set."""
        stream = self._from_workers(items, stop)
        if self.gpu is None:
            yield from stream
            return
        held: list[Decoded] = []
        encoded = 0
        for d in stream:
            held.append(d)
            encoded += d.encoded
            if encoded >= self.gpu_batch:
                yield from self._decode_on_gpu(held)
                held, encoded = [], 0
        if held:
            yield from self._decode_on_gpu(held)

    def _from_workers(self, items: Iterable[WorkItem], stop: threading.Event | None) -> Iterator[Decoded]:
        chunks = _chunks(items, self.chunk_size)
        args = (self.preprocess, self.max_pixels, self.fast_decode, self.gpu is not None)
        if self._executor is None:
            for chunk in chunks:
                if stop is not None and stop.is_set():
                    return
                yield from self._account(decode_chunk(chunk, *args))
            return
        window: deque[Future[DecodedChunk]] = deque()
        try:
            for chunk in chunks:
                if stop is not None and stop.is_set():
                    return
                window.append(self._executor.submit(decode_chunk, chunk, *args))
                if len(window) >= self.prefetch:
                    yield from self._take(window)
            while window:
                if stop is not None and stop.is_set():
                    return
                yield from self._take(window)
        finally:
            for fut in window:
                fut.cancel()

    def _decode_on_gpu(self, held: list[Decoded]) -> list[Decoded]:
        """The JPEG bytes among ``held`` decoded as one GPU batch, in place and in order; what nvJPEG
        refuses is decoded on the CPU like any file (same pixels path, same failure reasons)."""
        assert self.gpu is not None
        raw = [i for i, d in enumerate(held) if d.encoded]
        if not raw:
            return held
        start = time.perf_counter()
        pictures = self.gpu.decode([held[i].payload for i in raw])
        out = list(held)
        for i, picture in zip(raw, pictures, strict=True):
            if picture is None:
                out[i] = decode_bytes(held[i], self.preprocess, self.max_pixels, self.fast_decode)
                self.gpu_fallbacks += 1
            else:
                out[i] = Decoded(held[i].item, picture, None, held[i].seconds)
        self.gpu_seconds += time.perf_counter() - start
        return out

    def _take(self, window: deque[Future[DecodedChunk]]) -> list[Decoded]:
        self.window_samples += 1
        self.window_total += sum(1 for f in window if f.done())
        return self._account(window.popleft().result())

    def _account(self, chunk: DecodedChunk) -> list[Decoded]:
        self.busy_seconds += chunk.seconds
        return chunk.decoded()

    @property
    def mean_ready_chunks(self) -> float | None:
        """Decoded chunks already waiting when the encoder asked for one (0: decode is the bottleneck)."""
        return self.window_total / self.window_samples if self.window_samples else None
