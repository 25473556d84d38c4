"""Bulk writes to Elasticsearch: request bodies built straight from arrays, sent on several
connections, chunked by bytes, retried with backoff.

Why not ``elasticsearch.helpers.streaming_bulk``: it serializes one action at a time through
the client's serializer and sends one request at a time. With one shard, one bulk request is
indexed on one write thread, so a single sender leaves the node's other cores idle while Python
builds the next chunk. Here each document becomes its NDJSON bytes once (a 1000-term ``terms``
object is copied together by ``elastic.text`` from per-value text that says only what
Elasticsearch keeps: ~14 KB instead of ~27 KB as doubles), chunks are cut by bytes, and up to
``connections`` chunks are in flight at once.

Every action is an ``index`` (or ``delete``) by ``_id``, so sending a chunk twice changes
nothing: a retried or resumed load cannot duplicate a document.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

import numpy as np

from vsparta.termindex.base import TermDocument
from vsparta.termindex.elastic.common import (
    LOAD_FIELD,
    MAX_FEATURE_VALUE,
    METADATA_FIELD,
    MIN_FEATURE_VALUE,
    check_es_id,
    doc_source,
    metadata_json,
)
from vsparta.termindex.elastic.text import rows_repeating_a_term, terms_texts
from vsparta.termindex.elastic.translate import translate
from vsparta.termindex.errors import EngineUnavailable, InvalidDocument

log = logging.getLogger(__name__)

try:
    import orjson
except ImportError:  # pragma: no cover - orjson ships with the elasticsearch extra
    orjson = None  # type: ignore[assignment]

# (document id, NDJSON bytes of the action line and, for index actions, the source line)
Action = tuple[str, bytes]
# Per-item answers worth another try: rejected (busy) or the shard has no primary (a node lost).
RETRY_ITEM_STATUSES = {429, 503}
# Item errors that mean "try again" whatever their status (several answer 500): a node busy, lost,
# cut off or restarting, or a shard being moved or promoted. The same action succeeds once the
# cluster settles; a partitioned master's load failed on node_not_connected_exception before.
TRANSIENT_ITEM_ERRORS = frozenset(
    {
        "es_rejected_execution_exception",
        "opensearch_rejected_execution_exception",
        "circuit_breaking_exception",
        "node_not_connected_exception",
        "node_disconnected_exception",
        "node_closed_exception",
        "connect_transport_exception",
        "send_request_transport_exception",
        "receive_timeout_transport_exception",
        "no_shard_available_action_exception",
        "unavailable_shards_exception",
        "primary_missing_action_exception",
        "shard_not_in_primary_mode_exception",
        "retry_on_primary_exception",
        "shard_not_found_exception",
        "index_shard_closed_exception",
        "illegal_index_shard_state_exception",
        "cluster_block_exception",
        "master_not_discovered_exception",
        "cluster_manager_not_discovered_exception",
        "not_master_exception",
        "process_cluster_event_timeout_exception",
        "failed_to_commit_cluster_state_exception",
    }
)


def error_types(error: Any) -> list[str]:
    """The types of a bulk item's error and of every error it was caused by, outermost first."""
    found = []
    while isinstance(error, Mapping) and len(found) < 10:
        found.append(str(error.get("type", "")))
        error = error.get("caused_by")
    return found


def is_transient(item: Mapping[str, Any]) -> bool:
    """A failed bulk item worth sending again (``RETRY_ITEM_STATUSES``, ``TRANSIENT_ITEM_ERRORS``)."""
    status = int(item.get("status", 500))
    if 200 <= status < 300:
        return False
    types = error_types(item.get("error"))
    return status in RETRY_ITEM_STATUSES or any(t in TRANSIENT_ITEM_ERRORS for t in types)


def item_reason(item: Mapping[str, Any]) -> str:
    """One line for a failed item: status, error type and reason (the innermost cause too)."""
    err = item.get("error")
    if not isinstance(err, Mapping):
        return f"status {item.get('status')}: {err}"
    text = f"status {item.get('status')}, {err.get('type')}: {err.get('reason')}"
    types = error_types(err)
    if len(types) > 1:
        text += f" (caused by {types[-1]})"
    return text


@dataclass(frozen=True)
class BulkOptions:
    """How bulk requests are cut and retried (engine options of the same names)."""

    chunk_size: int = 500  # documents per request at most
    max_chunk_bytes: int = 8 * 1024 * 1024  # bytes per request at most (one document may exceed it)
    # 8 retries back off 0.5, 1, 2, ... 30 s: ~90 s in all, longer than a 3-node cluster here took to
    # elect a new master after its master was cut off and to promote the replicas of its primaries.
    max_retries: int = 8
    initial_backoff: float = 0.5
    max_backoff: float = 30.0
    bulk_timeout: float = 120.0
    connections: int = 2  # bulk requests in flight at once
    shard_timeout: str = "1m"  # how long Elasticsearch waits for an unavailable shard (a node lost)

    def __post_init__(self) -> None:
        if self.chunk_size < 1 or self.max_chunk_bytes < 1024 or self.connections < 1:
            raise ValueError("chunk_size and connections must be >= 1, max_chunk_bytes >= 1024")
        if self.max_retries < 0 or self.initial_backoff < 0 or self.max_backoff < 0:
            raise ValueError("max_retries, initial_backoff and max_backoff must be >= 0")

    def backoff(self, attempt: int) -> float:
        return min(self.max_backoff, self.initial_backoff * 2**attempt)


def _dumps(value: Any) -> bytes:
    if orjson is not None:
        return orjson.dumps(value)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def _action_line(op: str, target: str, doc_id: str) -> bytes:
    return _dumps({op: {"_index": target, "_id": doc_id}}) + b"\n"


def _index_action(
    target: str, doc_id: str, terms: bytes, metadata: Mapping[str, Any], load: str | None = None
) -> bytes:
    """One index action: the fields of ``doc_source``, with ``terms`` already as text; ``load``
    tags a document written by a running load (searches do not see it until the load ends:
    ``elastic.leases.hide_steps``)."""
    meta = dict(metadata)
    rest: dict[str, Any] = {
        "metadata": meta,
        METADATA_FIELD: metadata_json(doc_id, meta),
    }
    if isinstance(meta.get("image"), str):
        rest["image"] = meta["image"]
    if load is not None:
        rest[LOAD_FIELD] = load
    head = b'{"doc_id":' + _dumps(doc_id) + b',"terms":{' + terms + b"},"
    return _action_line("index", target, doc_id) + head + _dumps(rest)[1:] + b"\n"


def doc_actions(docs: Iterable[TermDocument], target: str, load: str | None = None) -> Iterator[Action]:
    """Index actions for documents (validated as ``doc_source`` says), stored exactly as
    ``array_actions`` stores the same terms."""
    for doc in docs:
        source = doc_source(doc)
        ids = np.fromiter((int(t) for t in source["terms"]), dtype=np.int64)
        weights = np.fromiter(source["terms"].values(), dtype=np.float32)
        (terms,) = terms_texts(np.array([0, len(ids)]), ids, weights)
        yield doc.id, _index_action(target, source["doc_id"], terms, source["metadata"], load)


def delete_actions(ids: Iterable[str], target: str) -> Iterator[Action]:
    for doc_id in ids:
        doc_id = check_es_id(doc_id)
        yield doc_id, _action_line("delete", target, doc_id)


def check_arrays(ids: Sequence[str], indptr: Any, term_ids: Any, weights: Any) -> tuple[np.ndarray, ...]:
    """CSR arrays as numpy, checked once for the whole batch (what ``doc_source`` checks per doc)."""
    indptr = np.asarray(indptr, dtype=np.int64)
    term_ids = np.asarray(term_ids)
    weights = np.asarray(weights, dtype=np.float32)
    if indptr.ndim != 1 or len(indptr) != len(ids) + 1 or (len(indptr) and indptr[0] != 0):
        raise InvalidDocument(f"indptr must have len(ids) + 1 = {len(ids) + 1} entries starting at 0")
    if np.any(np.diff(indptr) < 1):
        raise InvalidDocument("every document needs at least one term (indptr must increase)")
    if term_ids.shape != weights.shape or len(term_ids) != int(indptr[-1]):
        raise InvalidDocument("term_ids and weights must both hold indptr[-1] values")
    if not np.issubdtype(term_ids.dtype, np.integer) or (len(term_ids) and term_ids.min() < 0):
        raise InvalidDocument("term ids must be non-negative integers")
    bad = ~((weights >= MIN_FEATURE_VALUE) & (weights <= MAX_FEATURE_VALUE))  # NaN is bad too
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        doc = int(np.searchsorted(indptr, i, side="right")) - 1
        raise InvalidDocument(
            f"document {ids[doc]!r}: weight {float(weights[i])!r} of term {int(term_ids[i])} is outside the "
            f"float32 normal range [{MIN_FEATURE_VALUE:g}, {MAX_FEATURE_VALUE:g}] that rank_features stores"
        )
    return indptr, term_ids, weights


def array_actions(
    target: str,
    ids: Sequence[str],
    indptr: Any,
    term_ids: Any,
    weights: Any,
    metadata: Sequence[Mapping[str, Any]] | None = None,
    load: str | None = None,
) -> Iterator[Action]:
    """Index actions for CSR arrays: document i is ``term_ids/weights[indptr[i]:indptr[i+1]]``.

    The same ``_source`` as ``doc_actions`` writes for the same terms (same fields, same metadata
    JSON, each weight as the shortest text of the value Elasticsearch keeps, see ``elastic.text``).
    """
    indptr, term_ids, weights = check_arrays(ids, indptr, term_ids, weights)
    if metadata is not None and len(metadata) != len(ids):
        raise InvalidDocument(f"metadata must have one entry per id ({len(ids)}), got {len(metadata)}")
    texts = terms_texts(indptr, term_ids, weights)
    repeated = rows_repeating_a_term(indptr, term_ids).tolist()
    for i, raw_id in enumerate(ids):
        doc_id = check_es_id(raw_id)
        if repeated[i]:
            raise InvalidDocument(f"document {doc_id!r} lists a term id twice")
        yield (
            doc_id,
            _index_action(target, doc_id, texts[i], metadata[i] if metadata is not None else {}, load),
        )


def chunks(actions: Iterable[Action], options: BulkOptions) -> Iterator[list[Action]]:
    """Consecutive actions cut at ``chunk_size`` documents or ``max_chunk_bytes`` bytes."""
    chunk: list[Action] = []
    size = 0
    for action in actions:
        if chunk and (len(chunk) >= options.chunk_size or size + len(action[1]) > options.max_chunk_bytes):
            yield chunk
            chunk, size = [], 0
        chunk.append(action)
        size += len(action[1])
    if chunk:
        yield chunk


class BulkSender:
    """Sends chunks of actions on up to ``connections`` threads; returns one result per action.

    A result is the bulk item (``_id``, ``status``, ``result``, ``error``) plus ``_ok``. 429s
    (whole request or single items), lost connections and items whose error means "try again"
    (``is_transient``: a shard unavailable, a node not connected, a node busy) are retried with
    exponential backoff, only the failed items again; what still fails after ``max_retries``
    retries is returned as failed (the caller raises ``DocumentsNotWritten``, naming each one).
    """

    FILTER = "errors,items.*._id,items.*.status,items.*.result,items.*.error"

    def __init__(self, client: Any, options: BulkOptions, engine: str) -> None:
        self.client = client
        self.options = options
        self.engine = engine  # names the server in error messages

    def send(self, chunked: Iterable[list[Action]], what: str) -> list[dict[str, Any]]:
        opts = self.options
        if opts.connections == 1:
            return [r for chunk in chunked for r in self._send_chunk(chunk, what)]
        results: dict[int, list[dict[str, Any]]] = {}
        with ThreadPoolExecutor(opts.connections, thread_name_prefix="es-bulk") as pool:
            pending: dict[Future[list[dict[str, Any]]], int] = {}
            try:
                for n, chunk in enumerate(chunked):
                    # At most 2 chunks per connection built ahead: memory stays bounded.
                    while len(pending) >= 2 * opts.connections:
                        self._collect(pending, results, FIRST_COMPLETED)
                    pending[pool.submit(self._send_chunk, chunk, what)] = n
                while pending:
                    self._collect(pending, results, FIRST_COMPLETED)
            except BaseException:
                for f in pending:
                    f.cancel()
                raise
        return [r for n in sorted(results) for r in results[n]]

    @staticmethod
    def _collect(
        pending: dict[Future[list[dict[str, Any]]], int],
        results: dict[int, list[dict[str, Any]]],
        how: str,
    ) -> None:
        done, _ = wait(list(pending), return_when=how)
        for f in done:
            results[pending.pop(f)] = f.result()

    def _send_chunk(self, chunk: list[Action], what: str) -> list[dict[str, Any]]:
        from elasticsearch import exceptions as es_errors

        opts = self.options
        final: dict[int, dict[str, Any]] = {}
        todo = list(range(len(chunk)))
        for attempt in range(opts.max_retries + 1):
            body = b"".join(chunk[i][1] for i in todo)
            try:
                resp = self.client.bulk(
                    body=body,
                    request_timeout=opts.bulk_timeout,
                    timeout=opts.shard_timeout,
                    filter_path=self.FILTER,
                )
            except es_errors.TransportError as exc:
                retriable = isinstance(exc, es_errors.ConnectionError) or exc.status_code == 429
                if not retriable:
                    raise translate(exc, what, engine=self.engine) from exc
                if attempt == opts.max_retries:
                    raise EngineUnavailable(
                        f"{self.engine} bulk {what} failed after {opts.max_retries} retries: "
                        f"{translate(exc, what, engine=self.engine)}"
                    ) from exc
                self._pause(attempt, what, str(exc))
                continue
            items = [next(iter(item.values())) for item in resp.get("items", [])]
            if len(items) != len(todo):
                raise EngineUnavailable(f"bulk {what}: {len(items)} results for {len(todo)} actions")
            again = []
            for i, item in zip(todo, items, strict=True):
                status = int(item.get("status", 500))
                if attempt < opts.max_retries and is_transient(item):
                    again.append(i)
                    last = item
                else:
                    final[i] = item | {"_ok": 200 <= status < 300, "_tries": attempt + 1}
            if not again:
                break
            todo = again
            self._pause(attempt, what, f"{len(again)} documents not written yet ({item_reason(last)})")
        return [final[i] | {"_id": final[i].get("_id", chunk[i][0])} for i in range(len(chunk))]

    def call(self, fn: Callable[[], Any], what: str) -> Any:
        """One request with the bulk retry policy (lost connections and 429s, with backoff)."""
        from elasticsearch import exceptions as es_errors

        for attempt in range(self.options.max_retries + 1):
            try:
                return fn()
            except es_errors.TransportError as exc:
                retriable = isinstance(exc, es_errors.ConnectionError) or exc.status_code == 429
                if not retriable or attempt == self.options.max_retries:
                    raise translate(exc, what, engine=self.engine) from exc
                self._pause(attempt, what, str(exc))
        raise AssertionError("unreachable")

    def _pause(self, attempt: int, what: str, why: str) -> None:
        delay = self.options.backoff(attempt)
        log.warning("bulk %s: %s; retry %d in %.1fs", what, why, attempt + 1, delay)
        time.sleep(delay)
