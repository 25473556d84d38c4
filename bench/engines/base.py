"""What the runner needs from an engine: build, answer queries, say how big it is.

Adapters translate our CSR corpus and ``{id: boost}`` queries into each engine's own form in
``build`` and ``set_queries`` (untimed for queries: conversion is not search), so ``search``
times only the engine. Results are rows of the corpus (the runner compares them with the oracle).
"""

from __future__ import annotations

import contextlib
import os
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from vsparta.bench.corpus import Corpus, Query


class Skip(Exception):
    """The engine cannot run at this size or on this machine; the message says why (printed)."""


def dir_bytes(path: Path) -> int:
    """Bytes of every regular file under ``path`` (or the file itself)."""
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


class Adapter(ABC):
    """One engine under test. ``kind`` says whether it should agree with the oracle exactly."""

    name: str = "?"
    kind: str = "exact"
    sparse: bool = True  # dense baselines store vectors, not terms
    in_process: bool = True  # memory of out-of-process servers is not our RSS

    def check(self, corpus: Corpus, free_bytes: int) -> None:  # noqa: B027 - optional hook
        """Raise ``Skip`` with a reason if this engine cannot be run (missing package, too big)."""

    @abstractmethod
    def build(self, corpus: Corpus, workdir: Path) -> None:
        """Index the corpus (timed by the runner)."""

    def set_queries(self, queries: Sequence[Query]) -> None:
        """Convert queries to the engine's native form (not timed)."""
        self.queries = list(queries)

    @abstractmethod
    def search(self, qi: int, k: int) -> list[int]:
        """Top-k rows for query number ``qi``, best first."""

    def search_many(self, qis: Sequence[int], k: int, threads: int) -> list[list[int]]:
        """All queries on ``threads`` workers; engines with native parallel batches override."""
        if threads <= 1:
            return [self.search(qi, k) for qi in qis]
        with ThreadPoolExecutor(threads) as pool:
            return list(pool.map(lambda qi: self.search(qi, k), qis))

    @contextlib.contextmanager
    def threads(self, n: int) -> Iterator[None]:
        """Limit the engine's own thread pools (BLAS, OpenMP ...) while measuring."""
        yield

    def disk_bytes(self) -> int | None:
        """Size of the built index at rest, None when it has no on-disk form."""
        return None

    def close(self) -> None:  # noqa: B027 - optional hook
        """Free memory, delete indexes the engine created outside ``workdir``."""


def cpu_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
