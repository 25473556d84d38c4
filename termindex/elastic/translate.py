"""The Elasticsearch client's exceptions as ``vsparta.termindex.errors``: the one place that reads
an error's type, status and reason, for the sync and async engines (and OpenSearch's, which speak
through the same client)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from vsparta.termindex.errors import (
    DocumentNotFound,
    EngineUnavailable,
    IndexNotFound,
    InvalidQuery,
    TermIndexError,
)


def _error_type(exc: Any) -> str:
    info = getattr(exc, "info", None)
    if isinstance(info, Mapping):
        err = info.get("error")
        if isinstance(err, Mapping):
            return str(err.get("type", ""))
    return ""


def error_reason(err: Any) -> str:
    """An engine's error body in one line: its first root cause, and the cause it was caused by when
    that says more (a failed fetch phase has no root cause and says why only there). Also for the
    errors an ``_msearch`` or ``_mget`` answers inline."""
    if not isinstance(err, Mapping):
        return str(err)
    root = err.get("root_cause") or [err]
    first = root[0] if root and isinstance(root[0], Mapping) else err
    caused = err.get("caused_by")
    reason = f"{first.get('type')}: {first.get('reason') or ''}"
    if isinstance(caused, Mapping) and caused.get("reason") != first.get("reason"):
        said = first.get("reason")
        reason += f" ({caused.get('reason')})" if said else f"{caused.get('type')}: {caused.get('reason')}"
    return reason


def _reason(exc: Any) -> str:
    info = getattr(exc, "info", None)
    if isinstance(info, Mapping) and isinstance(info.get("error"), Mapping):
        return error_reason(info["error"])
    return str(getattr(exc, "error", "") or exc)


def translate(exc: Exception, what: str, *, engine: str, doc_id: str | None = None) -> TermIndexError:
    """Map a client exception to ``vsparta.termindex.errors``; callers ``raise translate(e) from e``.
    ``engine`` (the index class's ``engine_label``) names the server in the message: OpenSearch
    speaks through the same client and its exceptions."""
    from elasticsearch import exceptions as es

    if isinstance(exc, TermIndexError):
        return exc
    if isinstance(exc, es.UnsupportedProductError):  # answers HTTP, but not as the spec's engine
        if type(exc) is not es.UnsupportedProductError:  # a subclass (opensearch.client) says it all
            return EngineUnavailable(f"{exc} ({what})")
        return EngineUnavailable(
            f"the backend is not an Elasticsearch 7.x server ({what}): {exc}; check the backend URL "
            "(OpenSearch takes opensearch+http://HOST:PORT/NAME)"
        )
    if isinstance(exc, es.ConnectionTimeout):
        return EngineUnavailable(f"{engine} timed out ({what}): {exc}")
    if isinstance(exc, es.ConnectionError):  # includes SSL errors and refused connections
        return EngineUnavailable(f"{engine} is not reachable ({what}): {getattr(exc, 'info', exc)}")
    if isinstance(exc, es.TransportError):
        status = exc.status_code
        etype = _error_type(exc)
        if status == 404 and etype == "index_not_found_exception":
            return IndexNotFound(f"index or alias not found ({what}): {_reason(exc)}")
        if status == 404 and doc_id is not None:
            return DocumentNotFound(doc_id)
        if status == 404:
            return IndexNotFound(f"not found ({what}): {_reason(exc)}")
        if status == 400:
            return InvalidQuery(f"{engine} rejected the request ({what}): {_reason(exc)}")
        if status in (429, 502, 503, 504):
            return EngineUnavailable(f"{engine} is overloaded or unavailable ({what}): {_reason(exc)}")
        return TermIndexError(f"{engine} error {status} ({what}): {_reason(exc)}")
    return TermIndexError(f"unexpected error talking to {engine} ({what}): {exc!r}")


@contextmanager
def errors(what: str, *, engine: str, doc_id: str | None = None) -> Iterator[None]:
    """Translate client errors inside the block (works around ``await`` too)."""
    from elasticsearch import exceptions as es

    try:
        yield
    except (es.ElasticsearchException, OSError) as exc:
        raise translate(exc, what, engine=engine, doc_id=doc_id) from exc
