"""Timing and memory measurement around one adapter: latency percentiles, throughput, RSS peaks."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import psutil

from vsparta.bench.engines.base import Adapter


class RssPeak:
    """Samples this process's RSS every few ms in a thread; ``peak - start`` is the build's footprint.

    psutil sampling misses spikes shorter than the period, but index builds last seconds; tracemalloc
    would miss native allocations (scipy, PISA, Seismic, faiss), which is most of them.
    """

    def __init__(self, period_s: float = 0.005) -> None:
        self.period_s = period_s
        self.proc = psutil.Process()
        self.start = self.peak = self.end = 0
        self._stop = threading.Event()

    def __enter__(self) -> RssPeak:
        self.start = self.peak = self.proc.memory_info().rss
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            self.peak = max(self.peak, self.proc.memory_info().rss)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.end = self.proc.memory_info().rss
        self.peak = max(self.peak, self.end)

    @property
    def peak_delta(self) -> int:
        return self.peak - self.start

    @property
    def resident_delta(self) -> int:
        return self.end - self.start


@dataclass
class Timing:
    qps_1: float  # queries/s, one query at a time, engine limited to one thread
    p50_ms: float
    p99_ms: float
    qps_all: float | None  # queries/s with every core busy
    n_queries: int
    results: list[list[int]]  # from the single-thread pass, for the agreement check


def time_single(adapter: Adapter, qis: Sequence[int], k: int, budget_s: float, warmup: int = 5) -> Timing:
    """One query at a time on one thread; stops early (keeping what it measured) past ``budget_s``."""
    with adapter.threads(1):
        for qi in qis[:warmup]:
            adapter.search(qi, k)
        lat: list[float] = []
        results: list[list[int]] = []
        began = time.perf_counter()
        for qi in qis:
            t0 = time.perf_counter()
            results.append(adapter.search(qi, k))
            lat.append(time.perf_counter() - t0)
            if t0 - began > budget_s and len(lat) >= 20:
                break
        total = time.perf_counter() - began
    arr = np.asarray(lat) * 1000.0
    return Timing(
        qps_1=len(lat) / total,
        p50_ms=float(np.percentile(arr, 50)),
        p99_ms=float(np.percentile(arr, 99)),
        qps_all=None,
        n_queries=len(lat),
        results=results,
    )


def time_parallel(adapter: Adapter, qis: Sequence[int], k: int, threads: int) -> float:
    """Queries/s with ``threads`` workers (the engine's native batch where it has one).

    A thread pool of single queries keeps each query's own pools (BLAS) at one thread, so that
    ``threads`` queries run at once rather than threads x threads.
    """
    native = type(adapter).search_many is not Adapter.search_many
    with adapter.threads(threads if native else 1):
        adapter.search_many(qis[: max(threads, 4)], k, threads)  # warm the pools
        t0 = time.perf_counter()
        adapter.search_many(qis, k, threads)
        return len(qis) / (time.perf_counter() - t0)


def time_interleaved(
    adapters: Sequence[Adapter], qis: Sequence[int], k: int, budget_s: float, warmup: int = 5
) -> list[Timing]:
    """``time_single`` for several engines at once: query by query, each engine in a rotating order.

    Why: on a shared machine a burst of load lasts seconds; engines timed one after the other
    would each meet a different burst, engines timed query by query meet the same ones, so their
    ratio holds even when the absolute figures do not. Stops (for all alike) past
    ``budget_s`` per engine.
    """
    n = len(adapters)
    lat: list[list[float]] = [[] for _ in adapters]
    results: list[list[list[int]]] = [[] for _ in adapters]
    busy = [0.0] * n
    with contextlib.ExitStack() as stack:
        for a in adapters:
            stack.enter_context(a.threads(1))
            for qi in qis[:warmup]:
                a.search(qi, k)
        began = time.perf_counter()
        for j, qi in enumerate(qis):
            for i in [(j + r) % n for r in range(n)]:
                t0 = time.perf_counter()
                results[i].append(adapters[i].search(qi, k))
                lat[i].append(time.perf_counter() - t0)
                busy[i] += lat[i][-1]
            if time.perf_counter() - began > budget_s * n and j >= 19:
                break
    out = []
    for i in range(n):
        arr = np.asarray(lat[i]) * 1000.0
        out.append(
            Timing(
                qps_1=len(lat[i]) / busy[i],
                p50_ms=float(np.percentile(arr, 50)),
                p99_ms=float(np.percentile(arr, 99)),
                qps_all=None,
                n_queries=len(lat[i]),
                results=results[i],
            )
        )
    return out
