"""The pinned Elasticsearch 7.17 client, pointed at OpenSearch.

OpenSearch speaks the Elasticsearch 7.10 REST API that the 7.17 client sends, but clients from
7.14 on first call ``GET /`` and refuse any server that does not say it is Elasticsearch
(``UnsupportedProductError``). These transports run the project's server check
(``elastic.servers`` through ``elastic.transport``) asking for OpenSearch instead
(``version.distribution``), so a spec naming the wrong engine still fails on the first request,
in one sentence, and an untested OpenSearch version or one without ``rank_features`` is treated
exactly as an Elasticsearch one. Everything else (connection pool, serializer, errors) is the
client's own, which is what lets the OpenSearch engine reuse the Elasticsearch engine's code.
"""

from __future__ import annotations

from typing import Any

from vsparta.termindex.elastic.servers import NotOpenSearch, server_product
from vsparta.termindex.elastic.transport import (
    AsyncCheckedClient,
    AsyncCheckedTransport,
    CheckedClient,
    CheckedTransport,
)

__all__ = [
    "AsyncOpenSearchClient",
    "AsyncOpenSearchTransport",
    "NotOpenSearch",
    "OpenSearchClient",
    "OpenSearchTransport",
    "server_product",
]


class OpenSearchTransport(CheckedTransport):
    """``CheckedTransport`` asking for OpenSearch."""

    product = "opensearch"


class AsyncOpenSearchTransport(AsyncCheckedTransport):
    """``AsyncCheckedTransport`` asking for OpenSearch."""

    product = "opensearch"


class OpenSearchClient(CheckedClient):
    """The 7.17 client with ``OpenSearchTransport``: what ``OpenSearchIndex`` talks through."""

    transport_class: Any = OpenSearchTransport


class AsyncOpenSearchClient(AsyncCheckedClient):
    """The 7.17 async client with ``AsyncOpenSearchTransport`` (the service's reader)."""

    transport_class: Any = AsyncOpenSearchTransport
