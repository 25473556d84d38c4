"""Elasticsearch read side for the async service: search, get, similar, count, readiness.

Request bodies and response parsing are ``vsparta.termindex.elastic_common``'s, shared with the
synchronous engine, so both send and read exactly the same JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from elasticsearch import AsyncElasticsearch

from vsparta.termindex.base import Hit, TermDocument
from vsparta.termindex.elastic_common import (
    check_es_id,
    choose_track_total_hits,
    client_options,
    errors,
    fill_metadata,
    mget_metadata_body,
    parse_doc,
    parse_hits,
    pop_track_total_hits,
    sample_body,
    search_body,
    similar_query,
    validate_alias,
    without_metadata,
)
from vsparta.termindex.errors import DocumentNotFound, TermIndexError

__all__ = ["AsyncElasticsearchIndex"]


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

    @property
    def track_total_hits(self) -> bool | None:
        """As ``ElasticsearchIndex.track_total_hits``."""
        return self._track_total_hits

    async def _algorithm(self) -> bool:
        if self._track_total_hits is None:
            with errors("sample documents"):
                resp = await self._client.search(index=self.alias, **sample_body())
            chosen = choose_track_total_hits(resp)
            if chosen is None:
                return True
            self._track_total_hits = chosen
        return self._track_total_hits

    async def search(self, query: Mapping[int, float], k: int = 10, explain: bool = False) -> list[Hit]:
        body = search_body(query, k, explain, await self._algorithm())
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

    async def health(self) -> str:
        """The cluster's health for this index: green, yellow (a replica missing: answers are
        complete) or red (a primary missing: searches answer 503 until it is back)."""
        with errors("health"):
            resp = await self._client.cluster.health(index=self.alias, request_timeout=5)
        return str(resp["status"])

    async def ready(self) -> bool:
        """Reachable and the alias exists (what a readiness probe needs)."""
        try:
            with errors("ready"):
                return bool(await self._client.indices.exists(index=self.alias))
        except TermIndexError:
            return False

    async def close(self) -> None:
        await self._client.close()
