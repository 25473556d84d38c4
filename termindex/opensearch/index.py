"""``OpenSearchIndex`` and its async reader: the Elasticsearch classes with OpenSearch's client."""

from __future__ import annotations

from typing import Any

from vsparta.termindex.elastic.index import ElasticsearchIndex
from vsparta.termindex.elastic.index_async import AsyncElasticsearchIndex
from vsparta.termindex.opensearch.client import AsyncOpenSearchClient, OpenSearchClient

__all__ = ["AsyncOpenSearchIndex", "OpenSearchIndex"]


class OpenSearchIndex(ElasticsearchIndex):
    """A versioned ``rank_features`` index behind an alias on OpenSearch; options as
    ``ElasticsearchIndex`` (shards, replicas, new_version, bulk options, ...)."""

    client_class: Any = OpenSearchClient
    engine_label = "OpenSearch"
    spec_prefix = "opensearch+"


class AsyncOpenSearchIndex(AsyncElasticsearchIndex):
    """Read side for the async service, as ``AsyncElasticsearchIndex``."""

    client_class: Any = AsyncOpenSearchClient
    engine_label = "OpenSearch"
    spec_prefix = "opensearch+"
