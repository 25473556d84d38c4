"""The one Elasticsearch read path, for the synchronous engine and the async service alike.

Each read (count, get, search, similar, ping) is written once, as a generator of ``Call``s: it
builds a request, yields it, and parses the answer it is sent back. Only the transport differs:
``run_sync`` calls the client, ``run_async`` awaits it; both translate client errors the same way
(``translate.errors``). An engine that speaks the same protocol (OpenSearch) reuses this as is.
"""

from __future__ import annotations

import logging
from collections.abc import Generator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from vsparta.termindex.base import Hit, TermDocument, TermStatistics, similar_query, without_self
from vsparta.termindex.elastic.common import (
    check_es_id,
    choose_track_total_hits,
    fill_metadata,
    mget_metadata_body,
    parse_doc,
    parse_hits,
    sample_body,
    search_body,
    without_metadata,
)
from vsparta.termindex.elastic.statistics import StatisticsCache, parse_statistics, statistics_body
from vsparta.termindex.elastic.translate import errors
from vsparta.termindex.errors import DocumentNotFound, InvalidQuery, TermIndexError

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True)
class Call:
    """One client request: ``client.<method>(**kwargs)``; ``what`` names it in error messages."""

    what: str
    method: str  # attribute path on the client: "search", "cluster.health"
    kwargs: dict[str, Any] = field(default_factory=dict)
    doc_id: str | None = None  # a 404 for this id is DocumentNotFound, not IndexNotFound
    retry_node_left: bool = False  # a read: asked once more when a node left mid-request (NODE_LEFT)


Steps = Generator[Call, Any, T]


def _bound(client: Any, method: str) -> Any:
    for part in method.split("."):
        client = getattr(client, part)
    return client


# "A node left while this request was in flight": the coordinating node lost the connection to a
# node holding a shard copy it had picked (a partial answer, or a fetch phase that failed). Asked
# again at once, the request goes to the copies on live nodes. A node SIGKILLed under a search
# stream gave one such answer per kill (tests/termindex/test_elastic_cluster.py), each a 503.
NODE_LEFT = ("node_disconnected_exception", "node_not_connected_exception")
NODE_LEFT_REASON = "Node not connected"  # a failed fetch phase: a 500 whose root cause list is empty


def _node_left(found: Any) -> bool:
    """Whether an answer's shard failures or errors, or an error's body, name a node that left.

    An ``_msearch`` (``_mget``) answers 200 with each request's (document's) own outcome: partial
    answers carry shard failures, and a request whose fetch phase lost its node carries the same
    error inline that a search raises as a 500 (a node SIGKILLed under the term statistics,
    OpenSearch 2.19)."""
    if isinstance(found, Mapping):
        answers = found.get("responses") or found.get("docs") or [found]  # an _msearch's or _mget's
        failures = [f for a in answers for f in (a.get("_shards") or {}).get("failures") or []]
        inline = [a["error"] for a in answers if a.get("error")]
        return (
            bool(failures or inline)
            and all(str((f.get("reason") or {}).get("type")) in NODE_LEFT for f in failures)
            and all(_names_node_left(e) for e in inline)
        )
    return _names_node_left(getattr(found, "info", None))


def _names_node_left(body: Any) -> bool:
    text = str(body)
    return NODE_LEFT_REASON in text or any(kind in text for kind in NODE_LEFT)


def _asked_again(call: Call, attempt: int, answer: Any = None, error: BaseException | None = None) -> bool:
    if attempt or not call.retry_node_left:
        return False
    left = _node_left(error.__cause__) if error is not None else _node_left(answer)
    if left:
        log.info("%s: a node left mid-request; asking again", call.what)
    return left


def run_sync(client: Any, steps: Steps[T], engine: str) -> T:
    """Drive ``steps`` with a synchronous client; ``engine`` names the server in error messages."""
    try:
        call = next(steps)
        while True:
            for attempt in (0, 1):
                try:
                    with errors(call.what, engine=engine, doc_id=call.doc_id):
                        answer = _bound(client, call.method)(**call.kwargs)
                except TermIndexError as exc:
                    if _asked_again(call, attempt, error=exc):
                        continue
                    raise
                if not _asked_again(call, attempt, answer=answer):
                    break
            call = steps.send(answer)
    except StopIteration as done:
        return done.value


async def run_async(client: Any, steps: Steps[T], engine: str) -> T:
    """Drive ``steps`` with an async client: the same requests, awaited."""
    try:
        call = next(steps)
        while True:
            for attempt in (0, 1):
                try:
                    with errors(call.what, engine=engine, doc_id=call.doc_id):
                        answer = await _bound(client, call.method)(**call.kwargs)
                except TermIndexError as exc:
                    if _asked_again(call, attempt, error=exc):
                        continue
                    raise
                if not _asked_again(call, attempt, answer=answer):
                    break
            call = steps.send(answer)
    except StopIteration as done:
        return done.value


class ReadSteps:
    """The reads as steps, over ``self._target`` (the alias or a version being written) and
    ``self._track_total_hits`` (the search algorithm, chosen once per handle); ``self._statistics``
    caches document frequencies per index version (``elastic.statistics``)."""

    alias: str
    _target: str
    _track_total_hits: bool | None
    _statistics: StatisticsCache

    @property
    def track_total_hits(self) -> bool | None:
        """The search algorithm: True scores every match, False is block-max WAND, None not yet
        chosen (the option was not set and no search found documents to choose from)."""
        return self._track_total_hits

    def _algorithm_steps(self) -> Steps[bool]:
        if self._track_total_hits is None:
            sample = yield Call("sample documents", "search", {"index": self._target, **sample_body()})
            chosen = choose_track_total_hits(sample)
            if chosen is None:
                return True
            self._track_total_hits = chosen
            how = "every match scored" if chosen else "block-max WAND"
            log.info("%s: searching with %s (mean terms per document of a sample)", self.alias, how)
        return self._track_total_hits

    def _count_steps(self) -> Steps[int]:
        answer = yield Call("count", "count", {"index": self._target}, retry_node_left=True)
        return int(answer["count"])

    def _get_steps(self, doc_id: str) -> Steps[TermDocument]:
        doc_id = check_es_id(doc_id)
        answer = yield Call("get", "get", {"index": self._target, "id": doc_id}, doc_id=doc_id)
        if not answer.get("found"):
            raise DocumentNotFound(doc_id)
        return parse_doc(answer)

    def _search_steps(self, query: Mapping[int, float], k: int, explain: bool) -> Steps[list[Hit]]:
        algorithm = yield from self._algorithm_steps()
        body = search_body(query, k, explain, algorithm)
        answer = yield Call("search", "search", {"index": self._target, **body}, retry_node_left=True)
        hits = parse_hits(answer, query, explain)
        for h in answer["hits"]["hits"][:1]:  # the alias moved to a new version: stale frequencies
            self._statistics.seen_version(str(h.get("_index", "")))
        if missing := without_metadata(hits):
            found = yield Call(
                "mget metadata",
                "mget",
                {"index": self._target, **mget_metadata_body(missing)},
                retry_node_left=True,
            )
            hits = fill_metadata(hits, found)
        return hits

    def _term_statistics_steps(self, term_ids: Iterable[int]) -> Steps[TermStatistics]:
        """Document count and frequencies: from the cache, else one ``_msearch`` for the missing terms."""
        ids = sorted({int(t) for t in term_ids})
        if any(t < 0 for t in ids):
            raise InvalidQuery("vocabulary ids are non-negative integers")
        fresh: dict[int, int] = {}
        missing = self._statistics.missing(ids)
        if missing:
            body = statistics_body(missing)
            answer = yield Call(
                "term statistics", "msearch", {"index": self._target, "body": body}, retry_node_left=True
            )
            version, n_docs, fresh = parse_statistics(answer, missing)
            self._statistics.store(version, n_docs, fresh)
        cached = self._statistics.statistics(ids)
        return TermStatistics(cached.n_docs, {**cached.df, **fresh}, cached.version)

    def _similar_steps(self, doc_id: str, k: int, n_terms: int, explain: bool) -> Steps[list[Hit]]:
        """``TermIndex.similar``'s rule: the document's heaviest terms as the query, itself excluded."""
        doc = yield from self._get_steps(doc_id)
        hits = yield from self._search_steps(similar_query(doc, n_terms), k + 1, explain)
        return without_self(hits, doc_id, k)

    def _ping_steps(self) -> Steps[bool]:
        answer = yield Call("ping", "ping")
        return bool(answer)

    def _health_steps(self) -> Steps[str]:
        answer = yield Call("health", "cluster.health", {"index": self._target, "request_timeout": 5})
        return str(answer["status"])
