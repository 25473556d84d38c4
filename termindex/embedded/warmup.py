"""Compile every numba kernel of the embedded engine (write, merge, search) on a small index of
its own, or load them from numba's cache: for a benchmark that times jobs as every job after an
install's first runs them (``bench/indexing.py``), or an install step that wants the first query
fast. Takes 15-20 s on a fresh machine, under a second from the cache."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import numpy as np

from vsparta.termindex.embedded.index import EmbeddedIndex


def compile_kernels(folder: Path) -> float:
    """Write, delete, merge and search a small index in ``folder`` (removed afterwards); seconds."""
    start = time.perf_counter()
    shutil.rmtree(folder, ignore_errors=True)
    index = EmbeddedIndex(folder, create=True)
    # Every run encoding appears (dense: term 0 everywhere; split: term 1 in every 10th document;
    # flat: term 2 twice), so every kernel meets the array types a real index gives it.
    docs = [[0, 3 + i % 50] + [1] * (i % 10 == 0) + [2] * (i in (5, 400)) for i in range(600)]
    indptr = np.cumsum([0] + [len(d) for d in docs])
    terms = np.array([t for d in docs for t in sorted(d)], dtype=np.int32)
    weights = np.linspace(0.5, 2.0, len(terms), dtype=np.float32)
    for part in range(2):
        index.upsert_arrays([f"w{part}-{i}" for i in range(len(docs))], indptr, terms, weights)
    index.delete(["w0-1"])
    index.compact()
    index.close()
    reopened = EmbeddedIndex(folder)
    reopened.finish_load()  # the query kernels, on memory-mapped segments as a service has them
    reopened.close()
    shutil.rmtree(folder, ignore_errors=True)
    return time.perf_counter() - start
