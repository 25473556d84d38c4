"""Elasticsearch engine: ``rank_features`` documents behind an alias, versioned for re-indexing.

``name`` is an alias. Each build of the index is a concrete index ``<name>-v<N>``; a re-index
writes ``v<N+1>`` while searches keep hitting ``v<N>``, then one ``_aliases`` call moves the
alias (remove + add, atomic), so a search sees either the old or the new version, never a mix.
Old versions stay for ``rollback()`` (the newest ``keep_versions`` are kept).

Bulk loads stream documents in chunks (by count and bytes), retry 429 rejections and connection
failures with exponential backoff, and run with ``refresh_interval: -1`` and no replicas,
restored afterwards. ``_id`` is the document id, so a repeated load overwrites.

``AsyncElasticsearchIndex`` (read side, for the service) shares the request bodies and
response parsing in ``termindex.elastic_common``.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import islice
from typing import Any

from elasticsearch import AsyncElasticsearch, Elasticsearch
from elasticsearch import exceptions as es_errors
from elasticsearch.helpers import streaming_bulk

from termindex.base import Hit, TermDocument, TermIndex
from termindex.elastic_common import (
    MAPPING,
    METADATA_FIELD,
    check_es_id,
    client_options,
    doc_source,
    errors,
    fill_metadata,
    index_body,
    mget_metadata_body,
    parse_doc,
    parse_hits,
    pop_track_total_hits,
    search_body,
    similar_query,
    translate,
    validate_alias,
    without_metadata,
)
from termindex.errors import (
    DocumentNotFound,
    EngineUnavailable,
    IndexNotFound,
    InvalidDocument,
    InvalidQuery,
    TermIndexError,
)

__all__ = ["AsyncElasticsearchIndex", "ElasticsearchIndex", "IndexVersion", "Reindex"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class IndexVersion:
    """One concrete index behind the alias."""

    name: str
    number: int
    docs: int
    active: bool


@dataclass(frozen=True)
class _BulkOptions:
    chunk_size: int = 500
    max_chunk_bytes: int = 10 * 1024 * 1024
    max_retries: int = 5
    initial_backoff: float = 0.5
    max_backoff: float = 30.0
    bulk_timeout: float = 120.0

    def __post_init__(self) -> None:
        if self.chunk_size < 1 or self.max_chunk_bytes < 1024:
            raise ValueError("chunk_size must be >= 1 and max_chunk_bytes >= 1024")
        if self.max_retries < 0 or self.initial_backoff < 0 or self.max_backoff < 0:
            raise ValueError("max_retries, initial_backoff and max_backoff must be >= 0")

    def backoff(self, attempt: int) -> float:
        return min(self.max_backoff, self.initial_backoff * 2**attempt)


class ElasticsearchIndex(TermIndex):
    """A versioned ``rank_features`` index behind the alias ``name``.

    Options: ``request_timeout`` (s, default 10), ``shards`` (1), ``replicas`` (0),
    ``keep_versions`` (2), ``track_total_hits`` (True; False = block-max WAND, see
    ``elastic_common.search_body``), bulk: ``chunk_size`` (500 docs), ``max_chunk_bytes`` (10 MiB),
    ``max_retries`` (5), ``initial_backoff`` (0.5 s, doubling), ``max_backoff`` (30 s),
    ``bulk_timeout`` (120 s); client: ``http_auth``, ``api_key``, ``verify_certs``, ``ca_certs``.
    """

    def __init__(self, url: str, name: str, create: bool = False, **options: Any) -> None:
        self.url = url
        self.alias = validate_alias(name)
        client_kwargs, rest = client_options(options)
        self._shards = int(rest.pop("shards", 1))
        self._replicas = int(rest.pop("replicas", 0))
        self._keep = int(rest.pop("keep_versions", 2))
        self._track_total_hits = pop_track_total_hits(rest)
        if self._shards < 1 or self._replicas < 0 or self._keep < 1:
            raise ValueError("shards and keep_versions must be >= 1, replicas >= 0")
        self._bulk = _BulkOptions(**{k: rest.pop(k) for k in list(rest) if k in _BulkOptions.__annotations__})
        if rest:
            raise ValueError(f"unknown Elasticsearch options: {sorted(rest)}")
        self._client = Elasticsearch([url], **client_kwargs)
        self._owns_client = True
        # Reads and writes go to the alias; a Reindex writes to its concrete version instead.
        self._target = self.alias
        self._load_depth = 0
        self._mapping_checked: str | None = None  # target whose mapping has our current fields
        try:
            if create:
                self._ensure_alias()
            else:
                self._check_exists()
        except BaseException:
            self._client.close()
            raise

    @classmethod
    def _bound_to(cls, parent: ElasticsearchIndex, target: str) -> ElasticsearchIndex:
        """A view writing straight to one concrete version (used while re-indexing)."""
        view = cls.__new__(cls)
        view.__dict__.update(parent.__dict__)
        view._target = target
        view._owns_client = False
        view._load_depth = 0
        return view

    # -- versions and the alias ------------------------------------------------------------

    def _version_re(self) -> re.Pattern[str]:
        return re.compile(rf"^{re.escape(self.alias)}-v(\d+)$")

    def _check_exists(self) -> None:
        with errors("open"):
            if not self._client.indices.exists(index=self.alias):
                raise IndexNotFound(
                    f"no Elasticsearch index or alias {self.alias!r} at {self.url}; build one with "
                    f"`vsparta index IMAGES --backend {self.url}/{self.alias}`"
                )

    def _ensure_alias(self) -> None:
        with errors("create"):
            if self._client.indices.exists_alias(name=self.alias):
                return
            if self._client.indices.exists(index=self.alias):
                raise TermIndexError(
                    f"{self.alias!r} is a concrete index, not an alias: this engine needs the name free "
                    f"for an alias over versioned indices ({self.alias}-v1, ...)"
                )
        if not self._version_names() and self._create_first_version():
            return
        version = self._create_version()
        self._swap_alias(version, current=[])
        self._finish_version(version)

    def _create_first_version(self) -> bool:
        """Create ``<alias>-v1`` and the alias in one request, so that jobs starting together
        (shards) cannot each put their own version behind the alias. True when the alias exists
        afterwards, whoever created it."""
        name = f"{self.alias}-v1"
        body = index_body(self._shards, 0)
        body["aliases"] = {self.alias: {}}
        try:
            with errors("create version"):
                self._client.indices.create(index=name, **body)
        except InvalidQuery as exc:
            if "resource_already_exists" not in str(exc):
                raise
            with errors("create"):
                return bool(self._client.indices.exists_alias(name=self.alias))
        self._finish_version(name)
        log.info("alias %s -> %s (new)", self.alias, name)
        return True

    def _active(self) -> list[str]:
        with errors("read alias"):
            try:
                return sorted(self._client.indices.get_alias(name=self.alias))
            except es_errors.NotFoundError:
                return []

    def _version_names(self) -> dict[str, int]:
        pattern = self._version_re()
        with errors("list versions"):
            names = self._client.indices.get(index=f"{self.alias}-v*", ignore_unavailable=True)
        return {n: int(m.group(1)) for n in names if (m := pattern.match(n))}

    def _create_version(self) -> str:
        """Create ``<alias>-v<N+1>`` (retrying the number if a concurrent writer took it)."""
        for _ in range(5):
            number = max(self._version_names().values(), default=0) + 1
            name = f"{self.alias}-v{number}"
            try:
                with errors("create version"):
                    self._client.indices.create(index=name, **index_body(self._shards, 0))
                return name
            except InvalidQuery as exc:
                if "resource_already_exists" not in str(exc):
                    raise
        raise TermIndexError(f"could not allocate a new version of {self.alias!r}")

    def _swap_alias(self, version: str, current: list[str]) -> None:
        """One ``_aliases`` call: removing the old and adding the new happen atomically."""
        actions: list[dict[str, Any]] = [{"remove": {"index": c, "alias": self.alias}} for c in current]
        actions.append({"add": {"index": version, "alias": self.alias}})
        with errors("swap alias"):
            self._client.indices.update_aliases(body={"actions": actions})
        log.info("alias %s -> %s (was %s)", self.alias, version, ", ".join(current) or "nothing")

    def list_versions(self) -> list[IndexVersion]:
        """Every ``<alias>-v<N>`` index, oldest first, with its document count."""
        versions = self._version_names()
        if not versions:
            return []
        active = set(self._active())
        with errors("list versions"):
            rows = self._client.cat.indices(index=f"{self.alias}-v*", format="json", h="index,docs.count")
        counts = {r["index"]: int(r.get("docs.count") or 0) for r in rows}
        return [
            IndexVersion(name=n, number=v, docs=counts.get(n, 0), active=n in active)
            for n, v in sorted(versions.items(), key=lambda kv: kv[1])
        ]

    def begin_reindex(self) -> Reindex:
        """Start writing a new version; searches keep using the current one until ``commit``."""
        return Reindex(self, self._create_version())

    def activate(self, version: str) -> None:
        """Point the alias at ``version`` (an existing ``<alias>-v<N>``), atomically."""
        if version not in self._version_names():
            raise IndexNotFound(f"{version!r} is not a version of {self.alias!r}")
        current = self._active()
        if current != [version]:
            self._swap_alias(version, [c for c in current if c != version] if version in current else current)

    def rollback(self, version: str | None = None) -> str:
        """Point the alias back at ``version`` or, by default, the newest one older than the active."""
        if version is None:
            versions = self._version_names()
            active = [versions[a] for a in self._active() if a in versions]
            if not active:
                raise IndexNotFound(f"alias {self.alias!r} points at no version")
            older = [n for n, v in versions.items() if v < min(active)]
            if not older:
                raise TermIndexError(
                    f"no version of {self.alias!r} older than the active one to roll back to"
                )
            version = max(older, key=versions.__getitem__)
        self.activate(version)
        return version

    def prune(self, keep: int | None = None) -> list[str]:
        """Delete all but the newest ``keep`` versions (never the active one); returns deleted names."""
        keep = self._keep if keep is None else keep
        if keep < 1:
            raise ValueError("keep must be >= 1")
        versions = sorted(self._version_names().items(), key=lambda kv: kv[1])
        active = set(self._active())
        doomed = [n for n, _ in versions[: max(0, len(versions) - keep)] if n not in active]
        for name in doomed:
            with errors("delete old version"):
                self._client.indices.delete(index=name)
        return doomed

    def drop(self) -> None:
        """Delete the alias and every version (tests, ``--recreate``)."""
        names = list(self._version_names())
        with errors("drop"):
            for name in names:
                self._client.indices.delete(index=name)

    # -- bulk loading ----------------------------------------------------------------------

    def _concrete(self) -> list[str]:
        if self._target != self.alias:
            return [self._target]
        active = self._active()
        if not active:
            raise IndexNotFound(f"alias {self.alias!r} points at no index")
        return active

    def _set_load_settings(self, index: str, loading: bool, saved: Mapping[str, Any] | None = None) -> None:
        if loading:
            body: dict[str, Any] = {"index": {"refresh_interval": "-1", "number_of_replicas": 0}}
        else:
            saved = saved or {}
            refresh = saved.get("refresh_interval")
            if refresh in ("-1", -1):
                refresh = None  # left by a load that crashed: never keep refreshes off for good
            body = {
                "index": {
                    "refresh_interval": refresh,  # None = back to the default
                    "number_of_replicas": saved.get("number_of_replicas", self._replicas),
                }
            }
        with errors("update settings"):
            self._client.indices.put_settings(index=index, body=body)

    def _finish_version(self, index: str) -> None:
        """A new version's load settings back to serving ones (refresh, replicas, durable translog)."""
        self._set_load_settings(index, loading=False)
        with errors("update settings"):
            self._client.indices.put_settings(index=index, body={"index": {"translog.durability": None}})

    @contextmanager
    def bulk_load(self) -> Iterator[ElasticsearchIndex]:
        """Within the block: no refreshes, no replicas; restored and refreshed at the end."""
        if self._load_depth:
            self._load_depth += 1
            try:
                yield self
            finally:
                self._load_depth -= 1
            return
        indices = self._concrete()
        with errors("read settings"):
            current = self._client.indices.get_settings(
                index=",".join(indices), name="index.refresh_interval,index.number_of_replicas"
            )
        saved = {n: current.get(n, {}).get("settings", {}).get("index", {}) for n in indices}
        for n in indices:
            self._set_load_settings(n, loading=True)
        self._load_depth = 1
        try:
            yield self
        finally:
            self._load_depth = 0
            for n in indices:
                self._set_load_settings(n, loading=False, saved=saved[n])
            self.refresh()

    def refresh(self) -> None:
        with errors("refresh"):
            self._client.indices.refresh(index=self._target)

    def _send(self, actions: list[dict[str, Any]], what: str) -> list[dict[str, Any]]:
        """Send one window of actions; retry it whole on connection errors (ops are idempotent)."""
        opts = self._bulk
        for attempt in range(opts.max_retries + 1):
            results: list[dict[str, Any]] = []
            try:
                self._ensure_current_mapping()
                for ok, item in streaming_bulk(
                    self._client,
                    actions,
                    chunk_size=opts.chunk_size,
                    max_chunk_bytes=opts.max_chunk_bytes,
                    max_retries=opts.max_retries,  # 429s, per chunk or per item, with backoff
                    initial_backoff=opts.initial_backoff,
                    max_backoff=opts.max_backoff,
                    raise_on_error=False,
                    raise_on_exception=True,
                    request_timeout=opts.bulk_timeout,
                ):
                    results.append(next(iter(item.values())) | {"_ok": ok})
                return results
            except es_errors.TransportError as exc:
                # 429s were already retried by streaming_bulk; here: connection errors and timeouts.
                if not isinstance(exc, es_errors.ConnectionError) or attempt == opts.max_retries:
                    raise translate(exc, what) from exc
                delay = opts.backoff(attempt)
                log.warning("bulk %s failed (%s); retry %d in %.1fs", what, exc, attempt + 1, delay)
                time.sleep(delay)
        raise AssertionError("unreachable")

    def _check_results(self, results: list[dict[str, Any]], what: str, ok_statuses: set[int]) -> None:
        failed = [r for r in results if not r["_ok"] and r.get("status") not in ok_statuses]
        if not failed:
            return
        first = failed[0]
        err = first.get("error") or {}
        reason = f"{err.get('type')}: {err.get('reason')}" if isinstance(err, Mapping) else str(err)
        message = (
            f"{len(failed)} of {len(results)} documents failed ({what}); "
            f"first: id {first.get('_id')!r}, {reason}"
        )
        if any(r.get("status") == 429 for r in failed):
            raise EngineUnavailable(message + " (still rejected after retries)")
        if all(r.get("status") == 400 for r in failed):
            raise InvalidDocument(message)
        raise TermIndexError(message)

    def _windows(self, actions: Iterable[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
        it = iter(actions)
        while window := list(islice(it, self._bulk.chunk_size)):
            yield window

    def _ensure_current_mapping(self) -> None:
        """Add fields that newer versions of this engine write (``metadata_json``) to an index
        created by an older one; adding a field to a mapping is allowed and idempotent."""
        if self._mapping_checked == self._target:
            return
        # Raw client errors on purpose: _send retries connection errors around this call.
        self._client.indices.put_mapping(
            index=self._target, body={"properties": {METADATA_FIELD: MAPPING["properties"][METADATA_FIELD]}}
        )
        self._mapping_checked = self._target

    def upsert(self, docs: Iterable[TermDocument], refresh: bool = True) -> int:
        """Index (insert or replace by id) in bulk; visible after return unless inside ``bulk_load``."""
        target = self._target

        def actions() -> Iterator[dict[str, Any]]:
            for doc in docs:
                yield {"_op_type": "index", "_index": target, "_id": doc.id, "_source": doc_source(doc)}

        written = 0
        for window in self._windows(actions()):
            results = self._send(window, "upsert")
            self._check_results(results, "upsert", set())
            written += sum(1 for r in results if r["_ok"])
        if refresh and not self._load_depth:
            self.refresh()
        return written

    def delete(self, ids: Iterable[str], refresh: bool = True) -> int:
        target = self._target
        actions = ({"_op_type": "delete", "_index": target, "_id": check_es_id(i)} for i in ids)
        existed = 0
        for window in self._windows(actions):
            results = self._send(window, "delete")
            self._check_results(results, "delete", {404})
            existed += sum(1 for r in results if r["_ok"] and r.get("result") == "deleted")
        if refresh and not self._load_depth:
            self.refresh()
        return existed

    # -- reads -----------------------------------------------------------------------------

    def count(self) -> int:
        with errors("count"):
            return int(self._client.count(index=self._target)["count"])

    def get(self, doc_id: str) -> TermDocument:
        doc_id = check_es_id(doc_id)
        with errors("get", doc_id=doc_id):
            resp = self._client.get(index=self._target, id=doc_id)
        if not resp.get("found"):
            raise DocumentNotFound(doc_id)
        return parse_doc(resp)

    def existing_ids(self, ids: Iterable[str]) -> set[str]:
        """Which of ``ids`` are stored, in real time (sees writes not yet refreshed, e.g. mid-load).

        One ``_mget`` without sources per chunk: how a resumed indexing job skips finished work.
        """
        found: set[str] = set()
        it = iter([check_es_id(i) for i in ids])
        while chunk := list(islice(it, 1000)):
            with errors("mget"):
                resp = self._client.mget(index=self._target, body={"ids": chunk}, _source=False)
            found.update(d["_id"] for d in resp["docs"] if d.get("found"))
        return found

    def search(self, query: Mapping[int, float], k: int = 10, explain: bool = False) -> list[Hit]:
        body = search_body(query, k, explain, self._track_total_hits)
        with errors("search"):
            resp = self._client.search(index=self._target, **body)
        hits = parse_hits(resp, query, explain)
        if missing := without_metadata(hits):
            with errors("mget metadata"):
                hits = fill_metadata(
                    hits, self._client.mget(index=self._target, **mget_metadata_body(missing))
                )
        return hits

    def ping(self) -> bool:
        try:
            return bool(self._client.ping())
        except Exception:  # any failure means "not reachable"
            return False

    def close(self) -> None:
        if self._owns_client:
            self._client.close()


class Reindex:
    """A new version being written; ``commit()`` swaps the alias to it, ``abort()`` deletes it.

    As a context manager it commits on success and aborts on an exception::

        with index.begin_reindex() as new:
            new.upsert(docs)
    """

    def __init__(self, parent: ElasticsearchIndex, version: str) -> None:
        self.parent = parent
        self.version = version
        self.index = ElasticsearchIndex._bound_to(parent, version)
        self._done = False

    def upsert(self, docs: Iterable[TermDocument]) -> int:
        # The version was created with refresh off; one refresh at commit makes it all visible.
        return self.index.upsert(docs, refresh=False)

    def delete(self, ids: Iterable[str]) -> int:
        return self.index.delete(ids, refresh=False)

    def count(self) -> int:
        self.index.refresh()
        return self.index.count()

    def commit(self) -> str:
        """Finish the load (settings, refresh), swap the alias atomically, prune old versions."""
        if self._done:
            raise TermIndexError(f"reindex into {self.version} already finished")
        p = self.parent
        p._finish_version(self.version)
        self.index.refresh()
        p._swap_alias(self.version, [c for c in p._active() if c != self.version])
        self._done = True
        pruned = p.prune()
        if pruned:
            log.info("deleted old versions %s", ", ".join(pruned))
        return self.version

    def abort(self) -> None:
        if self._done:
            return
        self._done = True
        with errors("abort reindex"):
            self.parent._client.indices.delete(index=self.version, ignore_unavailable=True)

    def __enter__(self) -> Reindex:
        return self

    def __exit__(self, exc_type: object, *rest: object) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()


class AsyncElasticsearchIndex:
    """Read side for the async service: search, get, similar, count, readiness.

    Constructing it contacts nothing, so the service can start before Elasticsearch does.
    """

    def __init__(self, url: str, name: str, **options: Any) -> None:
        self.url = url
        self.alias = validate_alias(name)
        client_kwargs, rest = client_options(options)
        self._track_total_hits = pop_track_total_hits(rest)
        if rest:
            raise ValueError(f"unknown Elasticsearch options: {sorted(rest)}")
        self._client = AsyncElasticsearch([url], **client_kwargs)

    async def search(self, query: Mapping[int, float], k: int = 10, explain: bool = False) -> list[Hit]:
        body = search_body(query, k, explain, self._track_total_hits)
        with errors("search"):
            resp = await self._client.search(index=self.alias, **body)
        hits = parse_hits(resp, query, explain)
        if missing := without_metadata(hits):
            with errors("mget metadata"):
                resp = await self._client.mget(index=self.alias, **mget_metadata_body(missing))
            hits = fill_metadata(hits, resp)
        return hits

    async def get(self, doc_id: str) -> TermDocument:
        doc_id = check_es_id(doc_id)
        with errors("get", doc_id=doc_id):
            resp = await self._client.get(index=self.alias, id=doc_id)
        if not resp.get("found"):
            raise DocumentNotFound(doc_id)
        return parse_doc(resp)

    async def similar(self, doc_id: str, k: int = 10, n_terms: int = 32, explain: bool = False) -> list[Hit]:
        doc = await self.get(doc_id)
        hits = await self.search(similar_query(doc, n_terms), k=k + 1, explain=explain)
        return [h for h in hits if h.id != doc_id][:k]

    async def count(self) -> int:
        with errors("count"):
            return int((await self._client.count(index=self.alias))["count"])

    async def ping(self) -> bool:
        try:
            return bool(await self._client.ping())
        except Exception:  # any failure means "not reachable"
            return False

    async def ready(self) -> bool:
        """Reachable and the alias exists (what a readiness probe needs)."""
        try:
            with errors("ready"):
                return bool(await self._client.indices.exists(index=self.alias))
        except TermIndexError:
            return False

    async def close(self) -> None:
        await self._client.close()
