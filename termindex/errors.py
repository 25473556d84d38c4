"""Engine errors the service and indexer can map to clear messages (4xx/503), never stack traces."""

from __future__ import annotations


class TermIndexError(Exception):
    """Base class for every error raised by a term index engine."""


class EngineUnavailable(TermIndexError):
    """The engine cannot be reached or timed out: retry later (HTTP 503)."""


class IndexNotFound(TermIndexError):
    """The index or alias does not exist (not created yet, or wrong name)."""


class InvalidInput(TermIndexError, ValueError):
    """The caller sent something malformed (HTTP 422): catch this for either kind below."""


class InvalidQuery(InvalidInput):
    """The query is malformed: empty, NaN/negative/too large weights, bad k or term ids."""


class InvalidDocument(InvalidInput):
    """A document to write is malformed: bad id, NaN/negative weights, repeated terms, metadata."""


class DocumentNotFound(TermIndexError, KeyError):
    """No document with that id (HTTP 404)."""
