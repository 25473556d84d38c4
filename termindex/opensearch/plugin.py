"""OpenSearch's registration (``termindex.registry.PLUGINS``): Elasticsearch's parser, options and
client errors, its own scheme. Spec: ``opensearch+http(s)://HOST:PORT/NAME``.
"""

from __future__ import annotations

from typing import Any

from vsparta.termindex.base import TermIndex
from vsparta.termindex.elastic.plugin import INDEX_OPTIONS, client_errors, http_spec_parser
from vsparta.termindex.plugin import BackendSpec, Engine
from vsparta.termindex.reader import AsyncReader


def open_index(spec: BackendSpec, create: bool = False, **options: Any) -> TermIndex:
    from vsparta.termindex.opensearch.index import OpenSearchIndex

    return OpenSearchIndex(spec.location, spec.name, create=create, **options)


def open_async(spec: BackendSpec, request_timeout: float) -> AsyncReader:
    from vsparta.termindex.opensearch.index import AsyncOpenSearchIndex

    return AsyncOpenSearchIndex(spec.location, spec.name, request_timeout=request_timeout)


ENGINE = Engine(
    name="opensearch",
    label="OpenSearch",
    example="opensearch+http://HOST:PORT/INDEX",
    schemes=("opensearch+http", "opensearch+https"),
    parse=http_spec_parser("opensearch", "OpenSearch"),
    open=open_index,
    open_async=open_async,
    versions=True,
    index_options=INDEX_OPTIONS,
    client_loggers=("elasticsearch",),
    unreachable=client_errors("elasticsearch.exceptions", "ConnectionError"),
    wrong_server=client_errors("elasticsearch.exceptions", "UnsupportedProductError"),
    install_hint="pip install 'vsparta[service]'",
)
