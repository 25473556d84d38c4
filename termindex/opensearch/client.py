"""The pinned Elasticsearch 7.17 client, pointed at OpenSearch.

OpenSearch speaks the Elasticsearch 7.10 REST API that the 7.17 client sends, but clients from
7.14 on first call ``GET /`` and refuse any server that does not say it is Elasticsearch
(``UnsupportedProductError``). These transports replace that one check with its mirror image:
the server must say it is OpenSearch (``version.distribution``), so a spec naming the wrong
engine still fails on the first request, in one sentence. Everything else (connection pool,
serializer, errors) is the client's own, which is what lets the OpenSearch engine reuse the
Elasticsearch engine's code unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import chain
from typing import Any

from elasticsearch import AsyncElasticsearch, AsyncTransport, Elasticsearch, Transport
from elasticsearch.exceptions import (
    ConnectionError,
    SerializationError,
    TransportError,
    UnsupportedProductError,
)

__all__ = [
    "AsyncOpenSearchClient",
    "AsyncOpenSearchTransport",
    "NotOpenSearch",
    "OpenSearchClient",
    "OpenSearchTransport",
    "server_product",
]


def server_product(info: Mapping[str, Any]) -> tuple[str, str]:
    """(product, version number) from a ``GET /`` answer: ``opensearch`` or ``elasticsearch``."""
    version = info.get("version") if isinstance(info, Mapping) else None
    version = version if isinstance(version, Mapping) else {}
    product = "opensearch" if version.get("distribution") == "opensearch" else "elasticsearch"
    return product, str(version.get("number", "?"))


class NotOpenSearch(UnsupportedProductError):  # type: ignore[misc]
    """An ``opensearch+http`` spec names an Elasticsearch server; the message is the whole sentence
    (``elastic.common.translate`` passes it on as it is)."""


def _verdict(info: Any) -> bool:
    product, number = server_product(info)
    if product != "opensearch":
        raise NotOpenSearch(
            f"the backend is Elasticsearch {number}, not OpenSearch: "
            "name it with http://HOST:PORT/NAME, or point opensearch+http:// at an OpenSearch server"
        )
    return True


def _accept_json(headers: Mapping[str, str] | None) -> dict[str, str]:
    out = {k.lower(): v for k, v in (headers or {}).items()}
    out.setdefault("accept", "application/json")
    return out


class OpenSearchTransport(Transport):  # type: ignore[misc]
    """``Transport`` whose product check asks for OpenSearch instead of Elasticsearch."""

    def _do_verify_elasticsearch(self, headers: Any, timeout: Any) -> None:
        with self._verify_elasticsearch_lock:
            if self._verified_elasticsearch is not None:
                return
            error: Exception | None = None
            for conn in chain(self.connection_pool.connections, self.seed_connections):
                try:
                    _, _, raw = conn.perform_request(
                        "GET", "/", headers=_accept_json(headers), timeout=timeout
                    )
                    info = self.deserializer.loads(raw, mimetype="application/json")
                except (ConnectionError, SerializationError, TransportError) as err:
                    error = error or err
                    continue
                self._verified_elasticsearch = _verdict(info)
                return
            if error is not None:
                raise error


class AsyncOpenSearchTransport(AsyncTransport):  # type: ignore[misc]
    """``AsyncTransport`` whose product check asks for OpenSearch instead of Elasticsearch."""

    async def _do_verify_elasticsearch(self, headers: Any, timeout: Any) -> None:
        async with self._verify_elasticsearch_lock:
            if self._verified_elasticsearch is not None:
                return
            error: Exception | None = None
            for conn in chain(self.connection_pool.connections, self.seed_connections):
                try:
                    _, _, raw = await conn.perform_request(
                        "GET", "/", headers=_accept_json(headers), timeout=timeout
                    )
                    info = self.deserializer.loads(raw, mimetype="application/json")
                except (ConnectionError, SerializationError, TransportError) as err:
                    error = error or err
                    continue
                self._verified_elasticsearch = _verdict(info)
                return
            if error is not None:
                raise error


class OpenSearchClient(Elasticsearch):  # type: ignore[misc]
    """The 7.17 client with ``OpenSearchTransport``: what ``OpenSearchIndex`` talks through."""

    def __init__(self, hosts: Any = None, **kwargs: Any) -> None:
        super().__init__(hosts, transport_class=OpenSearchTransport, **kwargs)


class AsyncOpenSearchClient(AsyncElasticsearch):  # type: ignore[misc]
    """The 7.17 async client with ``AsyncOpenSearchTransport`` (the service's reader)."""

    def __init__(self, hosts: Any = None, **kwargs: Any) -> None:
        super().__init__(hosts, transport_class=AsyncOpenSearchTransport, **kwargs)
