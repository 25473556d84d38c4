"""Weighted-term index engines shared by the indexer (writes) and the service (reads).

``open_index(spec)`` picks the engine from one string, the same one the CLI and settings take:

- ``embedded:/path/to/dir`` (or a plain path): the embedded engine, files on disk.
- ``http://host:9200/NAME`` (or https): Elasticsearch; NAME is the alias searched and written.
"""

from __future__ import annotations

import re
from typing import Any

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

__all__ = [
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

_SCHEME = re.compile(r"^[A-Za-z][\w+.-]+:")  # two letters at least: "C:\\index" stays a path


def parse_spec(spec: str) -> tuple[str, str, str | None]:
    """Split a backend spec into (engine, location, index name); raise ValueError if malformed."""
    if spec.startswith(("http://", "https://")):
        scheme, rest = spec.split("://", 1)
        host, _, name = rest.partition("/")
        name = name.strip("/")
        if not host or not name or "/" in name:
            raise ValueError(f"Elasticsearch spec must be {scheme}://HOST:PORT/INDEX, got {spec!r}")
        return "elasticsearch", f"{scheme}://{host}", name
    if _SCHEME.match(spec) and not spec.startswith("embedded:"):  # a typo such as "embeded:" or "es://"
        raise ValueError(f"unknown backend {spec!r}: use embedded:/path/to/index or http://HOST:PORT/INDEX")
    path = spec[len("embedded:") :] if spec.startswith("embedded:") else spec
    if not path:
        raise ValueError("embedded spec needs a directory: embedded:/path/to/index")
    return "embedded", path, None


def open_index(spec: str, *, create: bool = False, **options: Any) -> TermIndex:
    """Open (or with ``create=True`` create) the index a spec names. Engines import lazily."""
    engine, location, name = parse_spec(spec)
    if engine == "elasticsearch":
        from vsparta.termindex.elastic import ElasticsearchIndex

        return ElasticsearchIndex(location, name, create=create, **options)
    from vsparta.termindex.embedded import EmbeddedIndex

    return EmbeddedIndex(location, create=create, **options)
