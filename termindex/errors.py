"""Engine errors the service and indexer can map to clear messages (4xx/503), never stack traces."""

from __future__ import annotations


class TermIndexError(Exception):
    """Base class for every error raised by a term index engine."""


class EngineUnavailable(TermIndexError):
    """The engine cannot be reached or timed out: retry later (HTTP 503)."""


class IndexNotFound(TermIndexError):
    """The index or alias does not exist (not created yet, or wrong name)."""


class InvalidQuery(TermIndexError, ValueError):
    """The query or document is malformed: empty, NaN/negative weights, bad ids (HTTP 422)."""


class DocumentNotFound(TermIndexError, KeyError):
    """No document with that id (HTTP 404)."""
