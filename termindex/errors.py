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


class DocumentsNotWritten(EngineUnavailable):
    """Some documents of a write were still refused after the engine's retries for reasons that
    pass (a node lost or cut off, a shard moving, a node busy). ``failed`` names each one with its
    reason, so a job can report them per document; writing them again (``--resume``) succeeds
    once the cluster settles."""

    def __init__(self, message: str, failed: dict[str, str]) -> None:
        super().__init__(message)
        self.failed = failed


class WrongBackend(TermIndexError):
    """The backend spec names servers that cannot hold one index: the same node twice, or nodes
    of different clusters. A mistake in the spec (the CLI exits 2), not an outage: retrying
    will not help."""
