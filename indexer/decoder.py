"""Decoder stage: file -> model input, in worker processes so the device never waits on JPEG.

Workers are started with the ``spawn`` method (safe beside torch and CUDA, the same on every
OS); each task carries the picklable preprocessor and a chunk of items, so workers hold no
state. At most ``prefetch`` chunks are in flight: memory stays bounded however large the input.
A file that cannot be read becomes a ``Failure``, never an exception that stops the job.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from itertools import islice
from typing import Any

import numpy as np

from indexer.items import Failure, WorkItem

log = logging.getLogger(__name__)

Preprocess = Callable[[Any], np.ndarray]


@dataclass
class Decoded:
    """One item after decoding: ``payload`` is the pixel array or the Regions, or None on failure."""

    item: WorkItem
    payload: Any = None
    failure: Failure | None = None
    seconds: float = 0.0


def _image_size(path: Any) -> tuple[int, int] | None:
    """Width and height from the header only (for normalizing region boxes given in pixels)."""
    from PIL import Image

    try:
        with Image.open(path) as im:
            return im.size
    except (OSError, ValueError):
        return None


def decode_item(item: WorkItem, preprocess: Preprocess | None, max_pixels: int | None) -> Decoded:
    """Decode one item; every error is turned into a Failure with a reason."""
    from model.images import ImageError, load_image

    start = time.perf_counter()
    try:
        if item.kind == "regions":
            from model.regions import load_regions

            size = _image_size(item.image) if item.image is not None and item.image.exists() else None
            payload: Any = load_regions(item.regions, image_size=size)
        else:
            if preprocess is None:
                raise ValueError("no preprocessor for pixel input")
            kwargs = {} if max_pixels is None else {"max_pixels": max_pixels}
            image = load_image(item.image, **kwargs)
            payload = np.asarray(preprocess(image), dtype=np.float32)
        return Decoded(item, payload, None, time.perf_counter() - start)
    except ImageError as exc:
        failure = Failure(item.id, item.location, exc.reason, str(exc))
    except FileNotFoundError as exc:
        failure = Failure(item.id, item.location, "missing", str(exc))
    except Exception as exc:  # noqa: BLE001 - one bad file must never stop the job
        reason = "bad_regions" if item.kind == "regions" else "unreadable"
        failure = Failure(item.id, item.location, reason, f"{type(exc).__name__}: {exc}")
    return Decoded(item, None, failure, time.perf_counter() - start)


def decode_chunk(
    items: list[WorkItem], preprocess: Preprocess | None, max_pixels: int | None
) -> list[Decoded]:
    return [decode_item(it, preprocess, max_pixels) for it in items]


def _worker_init(parent_pid: int) -> None:
    """Ctrl-C reaches the whole process group: let only the parent decide how to stop.

    A parent killed with SIGKILL cannot shut the pool down, and its workers would wait on the
    task queue forever (they hold its write end themselves): a watchdog thread exits the worker
    once it has been re-parented.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_exit_with_parent, args=(parent_pid,), daemon=True).start()


def _exit_with_parent(parent_pid: int, interval: float = 1.0) -> None:
    while os.getppid() == parent_pid:
        time.sleep(interval)
    os._exit(1)


def _chunks(items: Iterable[WorkItem], size: int) -> Iterator[list[WorkItem]]:
    it = iter(items)
    while chunk := list(islice(it, size)):
        yield chunk


class Decoder:
    """Ordered, bounded, optionally parallel ``items -> Decoded`` stream.

    ``workers=0`` decodes in the calling thread (debugging, tiny jobs, tests).
    """

    def __init__(
        self,
        preprocess: Preprocess | None,
        *,
        workers: int = 1,
        max_pixels: int | None = None,
        chunk_size: int = 8,
        prefetch: int | None = None,
    ) -> None:
        if workers < 0:
            raise ValueError(f"--workers must be >= 0, got {workers}")
        self.preprocess = preprocess
        self.workers = workers
        self.max_pixels = max_pixels
        self.chunk_size = max(1, chunk_size)
        self.prefetch = prefetch or max(2, 4 * workers)
        self._pool: ProcessPoolExecutor | None = None

    def __enter__(self) -> Decoder:
        if self.workers > 0:
            ctx = multiprocessing.get_context("spawn")
            self._pool = ProcessPoolExecutor(
                self.workers, mp_context=ctx, initializer=_worker_init, initargs=(os.getpid(),)
            )
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def iter_decoded(
        self, items: Iterable[WorkItem], stop: threading.Event | None = None
    ) -> Iterator[Decoded]:
        """Yield decoded items in input order; stops submitting new work once ``stop`` is set."""
        chunks = _chunks(items, self.chunk_size)
        if self._pool is None:
            for chunk in chunks:
                if stop is not None and stop.is_set():
                    return
                yield from decode_chunk(chunk, self.preprocess, self.max_pixels)
            return
        window: deque[Future[list[Decoded]]] = deque()
        try:
            for chunk in chunks:
                if stop is not None and stop.is_set():
                    return
                window.append(self._pool.submit(decode_chunk, chunk, self.preprocess, self.max_pixels))
                if len(window) >= self.prefetch:
                    yield from window.popleft().result()
            while window:
                if stop is not None and stop.is_set():
                    return
                yield from window.popleft().result()
        finally:
            for fut in window:
                fut.cancel()
