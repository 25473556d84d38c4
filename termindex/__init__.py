"""Weighted-term index engines shared by the indexer (writes) and the service (reads).

``open_index(spec)`` picks the engine from one string, the same one the CLI and settings take:

- ``embedded:/path/to/dir`` (or a plain path): the embedded engine, files on disk.
- ``http://host:9200/NAME`` (or https, or explicitly ``elasticsearch+http://...``):
  Elasticsearch; NAME is the alias searched and written.

Each engine is a package (``embedded/``, ``elastic/``) registered in ``registry`` (see there, and
``plugin`` for what an engine provides); the modules here are what they share.
"""

from __future__ import annotations

from vsparta.termindex.base import MAX_QUERY_WEIGHT, Hit, TermDocument, TermIndex, heaviest_terms, score
from vsparta.termindex.errors import (
    DocumentNotFound,
    EngineUnavailable,
    IndexNotFound,
    InvalidDocument,
    InvalidInput,
    InvalidQuery,
    TermIndexError,
)
from vsparta.termindex.plugin import BackendSpec
from vsparta.termindex.registry import open_index, parse_spec

__all__ = [
    "BackendSpec",
    "DocumentNotFound",
    "EngineUnavailable",
    "Hit",
    "IndexNotFound",
    "InvalidDocument",
    "InvalidInput",
    "MAX_QUERY_WEIGHT",
    "InvalidQuery",
    "TermDocument",
    "TermIndex",
    "TermIndexError",
    "heaviest_terms",
    "open_index",
    "parse_spec",
    "score",
]
