"""Elasticsearch 7.17 engine: ``rank_features`` documents behind an alias, one node or a cluster.

Modules: ``index`` (the synchronous engine, reads and writes), ``index_async`` (the service's
read side), ``reads`` (the one read path both run: requests built and answers parsed once),
``common`` (bodies, parsing, error translation), ``bulk`` (bulk writes), ``text`` (what a weight
becomes), ``versions`` (the alias over versioned indices), ``plugin`` (its registration).

The classes load on first use, so registering the engine does not import the client library.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "ElasticsearchIndex": "vsparta.termindex.elastic.index",
    "IndexVersion": "vsparta.termindex.elastic.versions",
    "Reindex": "vsparta.termindex.elastic.versions",
    "AsyncElasticsearchIndex": "vsparta.termindex.elastic.index_async",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
