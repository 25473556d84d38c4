"""Elasticsearch engine: ``rank_features`` documents behind an alias, for one node or a cluster.

``name`` is an alias over versioned concrete indices (``vsparta.termindex.elastic.versions``). Writes go
through ``vsparta.termindex.elastic.bulk``: bodies built from arrays, several connections, chunks cut by
bytes, 429s and lost connections retried with backoff; ``_id`` is the document id, so a
repeated or resumed load overwrites instead of duplicating.

A cluster: new indices get two primary shards per data node and one replica when there is more
than one node (``shards``/``replicas`` override). A bulk load runs with refreshes off and rare
translog flushes (and no replicas on a version not served yet), all restored afterwards, also
after a failure or a kill (``elastic.leases``); ``finish_load`` after a complete load
force-merges to few segments (smaller, faster to search). Both are ``elastic.loading.BulkLoading``,
which this class inherits.

``AsyncElasticsearchIndex`` (read side, for the service) is in ``vsparta.termindex.elastic.index_async``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from itertools import islice
from typing import Any, TypeVar

from vsparta.termindex.base import Hit, TermDocument, TermIndex, TermStatistics
from vsparta.termindex.elastic import leases
from vsparta.termindex.elastic.bulk import (
    Action,
    BulkOptions,
    BulkSender,
    array_actions,
    chunks,
    delete_actions,
    doc_actions,
    is_transient,
    item_reason,
)
from vsparta.termindex.elastic.common import (
    LOAD_FIELD,
    MAPPING,
    METADATA_FIELD,
    check_es_id,
    client_options,
    make_client,
    mget_metadata_body,
    mget_stored_metadata_body,
    pop_track_total_hits,
    source_metadata,
    stored_metadata,
    validate_alias,
)
from vsparta.termindex.elastic.index_async import AsyncElasticsearchIndex
from vsparta.termindex.elastic.loading import BulkLoading
from vsparta.termindex.elastic.reads import ReadSteps, Steps, run_sync
from vsparta.termindex.elastic.statistics import StatisticsCache
from vsparta.termindex.elastic.translate import errors
from vsparta.termindex.elastic.transport import CheckedClient
from vsparta.termindex.elastic.versions import IndexVersion, Reindex, VersionedAlias
from vsparta.termindex.errors import (
    DocumentsNotWritten,
    InvalidDocument,
    TermIndexError,
    WrongBackend,
)

__all__ = ["AsyncElasticsearchIndex", "ElasticsearchIndex", "IndexVersion", "Reindex"]

log = logging.getLogger(__name__)
T = TypeVar("T")


# One query searches the shards of an index in parallel, one thread each. Two per node: at 1M
# model-shaped images on one 2-core node, p50 70 instead of 127 ms scoring everything and 40
# instead of 68 ms with block-max WAND (docs/elasticsearch.md). (At 10K images on a busy machine
# two were no faster; the gain is in scoring long posting lists, which large indices have.)
SHARDS_PER_NODE = 2

# Stored fields (the ~1,000-term _source) with DEFLATE: 8.3 instead of 12.4 bytes per term. A top-10
# search pays ~2 ms more (10 hits' stored metadata decompressed): a constant, while scoring grows
# with the index (docs/elasticsearch.md).
DEFAULT_CODEC = "best_compression"


ID_PAGE = 5000  # ids per scroll page of ``iter_ids``


class ElasticsearchIndex(ReadSteps, BulkLoading, VersionedAlias, TermIndex):
    """A versioned ``rank_features`` index behind the alias ``name``.

    Options: ``request_timeout`` (s, default 10), ``shards`` (default: ``SHARDS_PER_NODE`` per data node),
    ``replicas`` (default: 1 on a cluster, 0 on one node), ``keep_versions`` (2),
    ``new_version`` (False: write a new version, aliased by ``finish_load``), ``merge_segments``
    (segments per shard after a full load, default 1; 0 = no force-merge), ``codec`` of new
    versions (``best_compression``, the default, or ``default``: LZ4), ``track_total_hits``
    (True = score every match, False = block-max WAND; by default chosen at the first search from
    a sample's mean document length, ``elastic.common.choose_track_total_hits``), bulk: ``chunk_size``
    (500 docs), ``max_chunk_bytes`` (8 MiB), ``connections`` (2 requests in flight),
    ``shard_timeout`` (how long a bulk request waits for an unavailable shard, "1m"),
    ``max_retries`` (5), ``initial_backoff`` (0.5 s, doubling), ``max_backoff`` (30 s),
    ``bulk_timeout`` (120 s); loads: ``keep_replicas`` (default: True for the served version,
    False for a new one), ``load_lease_s`` (``elastic.leases``); client: ``http_auth``,
    ``api_key``, ``verify_certs``, ``ca_certs``.
    """

    client_class: Any = CheckedClient  # an engine speaking the same protocol swaps the client
    engine_label = "Elasticsearch"
    spec_prefix = ""  # before the URL in a backend spec that names this engine

    def __init__(self, url: str, name: str, create: bool = False, **options: Any) -> None:
        self.url = url
        self.alias = validate_alias(name)
        client_kwargs, rest = client_options(options)
        shards, replicas = rest.pop("shards", None), rest.pop("replicas", None)
        self._keep = int(rest.pop("keep_versions", 2))
        self._merge_segments = int(rest.pop("merge_segments", 1))
        self._codec = str(rest.pop("codec", DEFAULT_CODEC))
        new_version = bool(rest.pop("new_version", False))
        keep_replicas = rest.pop("keep_replicas", None)
        self._keep_replicas = None if keep_replicas is None else bool(keep_replicas)
        self._lease_s = leases.lease_seconds(rest.pop("load_lease_s", None))
        self._watch = leases.LeaseWatch()  # how long this handle has seen other loads' beats stand still
        self._track_total_hits = pop_track_total_hits(rest)
        self._statistics = StatisticsCache()
        if (shards is not None and int(shards) < 1) or (replicas is not None and int(replicas) < 0):
            raise ValueError("shards must be >= 1 and replicas >= 0")
        if self._keep < 1 or self._merge_segments < 0:
            raise ValueError("keep_versions must be >= 1 and merge_segments >= 0")
        bulk = {k: rest.pop(k) for k in list(rest) if k in BulkOptions.__annotations__}
        self._bulk = BulkOptions(**bulk)
        if rest:
            raise ValueError(f"unknown {self.engine_label} options: {sorted(rest)}")
        # A batch job may wait where the service may not: a node cut off from its cluster still
        # accepts HTTP and holds a request until it times out, so this client asks the next node
        # of the host list then (and marks the silent one dead for a while); the service's async
        # reader keeps its time bound and does not.
        self._client = make_client(self.client_class, url, client_kwargs | {"retry_on_timeout": True})
        self._owns_client = True
        self._sender = BulkSender(self._client, self._bulk, self.engine_label)
        self._replicas_set = replicas is not None
        # Reads and writes go to the alias; a Reindex or a new version writes to its own index.
        self._target = self.alias
        self._fresh = False  # this handle created the index: empty, nobody searches it yet
        self._load_depth = 0
        self._load_job: str | None = None  # the running load's job id: its documents carry it
        self._loaded = 0  # documents written through this handle (what finish_load judges)
        self._reindex: Reindex | None = None
        self._mapping_checked: str | None = None  # target whose mapping has our current fields
        try:
            nodes = self._data_nodes() if create and (shards is None or replicas is None) else 1
            self._shards = int(shards) if shards is not None else SHARDS_PER_NODE * nodes
            self._replicas = int(replicas) if replicas is not None else min(1, nodes - 1)
            if create:
                created = self._ensure_alias()
                self._fresh = created
                if new_version and not created:
                    self._reindex = self.begin_reindex()
                    self._target = self._reindex.version
            else:
                self._check_exists()
        except BaseException:
            self._client.close()
            raise
        try:
            self.recover_stale_loads()
        except WrongBackend:  # the spec's mistake (two clusters): said once, by the caller
            raise
        except TermIndexError as exc:  # opening still works; the next opener tries again
            log.warning("could not check %s for loads that were killed: %s", self.alias, exc)

    def _data_nodes(self) -> int:
        with errors("cluster health", engine=self.engine_label):
            return max(1, int(self._client.cluster.health()["number_of_data_nodes"]))

    @classmethod
    def _bound_to(cls, parent: ElasticsearchIndex, target: str) -> ElasticsearchIndex:
        """A view writing straight to one concrete version (used while re-indexing)."""
        view = cls.__new__(cls)
        view.__dict__.update(parent.__dict__)
        view._target = target
        view._owns_client = False
        view._load_depth = 0
        view._load_job = None
        view._loaded = 0
        view._reindex = None
        return view

    @property
    def target(self) -> str:
        """Where writes go: the alias, or the new version being written."""
        return self._target

    def _ensure_current_mapping(self) -> None:
        """Add fields that newer versions of this engine write (``metadata_json``, ``load``) to an
        index created by an older one; adding a field to a mapping is allowed and idempotent."""
        if self._mapping_checked == self._target:
            return
        body = {"properties": {f: MAPPING["properties"][f] for f in (METADATA_FIELD, LOAD_FIELD)}}
        put = self._client.indices.put_mapping
        self._sender.call(lambda: put(index=self._target, body=body), "update mapping")
        self._mapping_checked = self._target

    def _write(self, actions: Iterable[Action], what: str, ok_statuses: set[int]) -> list[dict[str, Any]]:
        self._ensure_current_mapping()
        results = self._sender.send(chunks(actions, self._bulk), what)
        self._check_results(results, what, ok_statuses)
        return results

    def _check_results(self, results: list[dict[str, Any]], what: str, ok_statuses: set[int]) -> None:
        failed = [r for r in results if not r["_ok"] and r.get("status") not in ok_statuses]
        if not failed:
            return
        first = failed[0]
        message = (
            f"{len(failed)} of {len(results)} documents failed ({what}); "
            f"first: id {first.get('_id')!r}, {item_reason(first)}"
        )
        if all(is_transient(r) for r in failed):
            retries = int(first.get("_tries", 1)) - 1
            raise DocumentsNotWritten(
                f"{message} (still refused after {retries} retries; writing them again once the "
                "cluster settles succeeds: --resume)",
                {str(r.get("_id")): item_reason(r) for r in failed},
            )
        if all(r.get("status") == 400 for r in failed):
            raise InvalidDocument(message)
        raise TermIndexError(message)

    def _written(self, results: list[dict[str, Any]], refresh: bool) -> int:
        if refresh and not self._load_depth:
            self.refresh()
        written = sum(1 for r in results if r["_ok"])
        self._loaded += written
        return written

    def upsert(self, docs: Iterable[TermDocument], refresh: bool = True) -> int:
        """Index (insert or replace by id) in bulk; visible after return unless inside ``bulk_load``."""
        actions = doc_actions(docs, self._target, self._load_job)
        return self._written(self._write(actions, "upsert", set()), refresh)

    def upsert_arrays(
        self,
        ids: list[str],
        indptr: Any,
        term_ids: Any,
        weights: Any,
        metadata: list[Mapping[str, Any]] | None = None,
        refresh: bool = True,
    ) -> int:
        """``upsert`` from CSR arrays, with no Python object per term (see ``elastic.bulk``)."""
        actions = array_actions(self._target, ids, indptr, term_ids, weights, metadata, self._load_job)
        return self._written(self._write(actions, "upsert", set()), refresh)

    def delete(self, ids: Iterable[str], refresh: bool = True) -> int:
        results = self._write(delete_actions(ids, self._target), "delete", {404})
        existed = sum(1 for r in results if r["_ok"] and r.get("result") == "deleted")
        if refresh and not self._load_depth:
            self.refresh()
        return existed

    # -- reads (``reads.ReadSteps``, shared with the async side) ------------------------------

    def _run(self, steps: Steps[T]) -> T:
        return run_sync(self._client, steps, self.engine_label)

    def count(self) -> int:
        return self._run(self._count_steps())

    def get(self, doc_id: str) -> TermDocument:
        return self._run(self._get_steps(doc_id))

    def search(self, query: Mapping[int, float], k: int = 10, explain: bool = False) -> list[Hit]:
        return self._run(self._search_steps(query, k, explain))

    def term_statistics(self, term_ids: Iterable[int]) -> TermStatistics:
        """One ``_msearch`` of hit counts for the terms not cached (``elastic.statistics``)."""
        return self._run(self._term_statistics_steps(term_ids))

    def similar(self, doc_id: str, k: int = 10, n_terms: int = 32, explain: bool = False) -> list[Hit]:
        return self._run(self._similar_steps(doc_id, k, n_terms, explain))

    def existing_ids(self, ids: Iterable[str]) -> set[str]:
        """Which of ``ids`` are stored, in real time (sees writes not yet refreshed, e.g. mid-load).

        One ``_mget`` without sources per chunk: how a resumed indexing job skips finished work. A
        document whose shard cannot answer (an inline error) counts as absent: the job writes it
        again, which an upsert by id makes harmless, where skipping it could lose it.
        """
        found: set[str] = set()
        it = iter([check_es_id(i) for i in ids])
        while chunk := list(islice(it, 1000)):
            with errors("mget", engine=self.engine_label):
                resp = self._client.mget(index=self._target, body={"ids": chunk}, _source=False)
            found.update(d["_id"] for d in resp["docs"] if d.get("found"))
        return found

    def existing_metadata(self, ids: Iterable[str]) -> dict[str, Mapping[str, Any]]:
        """``existing_ids`` with each document's metadata: one ``_mget`` of the stored
        ``metadata_json`` per chunk (of ``_source`` for documents written before it existed), in
        real time; a document whose shard cannot answer counts as absent."""
        found: dict[str, Mapping[str, Any]] = {}
        it = iter([check_es_id(i) for i in ids])
        while chunk := list(islice(it, 1000)):
            with errors("mget", engine=self.engine_label):
                stored, older = stored_metadata(
                    self._client.mget(index=self._target, **mget_stored_metadata_body(chunk))
                )
                if older:
                    stored |= source_metadata(
                        self._client.mget(index=self._target, **mget_metadata_body(older))
                    )
            found.update(stored)
        return found

    def iter_ids(self) -> Iterator[str]:
        """Every document's id: a refresh (a load's writes become searchable), then one scroll of
        ``_id``s without sources. A shard that cannot answer raises (``TermIndexError``) rather than
        give a partial list, with which ``--prune`` would leave documents and not know it."""
        from elasticsearch.helpers import scan

        self.refresh()
        query = {"query": {"match_all": {}}, "_source": False}
        with errors("list ids", engine=self.engine_label):
            for hit in scan(self._client, query=query, index=self._target, size=ID_PAGE, scroll="5m"):
                yield hit["_id"]

    def ping(self) -> bool:
        try:
            return self._run(self._ping_steps())
        except Exception:  # any failure means "not reachable"
            return False

    def close(self) -> None:
        if self._owns_client:
            self._client.close()
