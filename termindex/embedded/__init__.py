"""The embedded engine: files on disk, memory-mapped, numba kernels, no server.

Modules: ``index`` (``EmbeddedIndex``: snapshots, writes, merges), ``format`` (the on-disk
format), ``writer``/``build``/``batches`` (segments written), ``postings``/``scoring``/``search``
(reading them), ``weights`` (half floats and score tables), ``policy`` (merges), ``plugin`` (its
registration). ``EmbeddedIndex`` loads on first use, so registering the engine imports no numba.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["EmbeddedIndex"]


def __getattr__(name: str) -> Any:
    if name == "EmbeddedIndex":
        return importlib.import_module("vsparta.termindex.embedded.index").EmbeddedIndex
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
