"""OpenSearch's registration (``termindex.registry.PLUGINS``): Elasticsearch's parser, options and
client errors, its own scheme. Spec: ``opensearch+http(s)://HOST:PORT/NAME``.
"""

from __future__ import annotations

from vsparta.termindex.elastic.plugin import protocol_engine

ENGINE = protocol_engine(
    name="opensearch",
    label="OpenSearch",
    example="opensearch+http://HOST:PORT/INDEX",
    schemes=("opensearch+http", "opensearch+https"),
    index=("vsparta.termindex.opensearch.index", "OpenSearchIndex"),
    reader=("vsparta.termindex.opensearch.index", "AsyncOpenSearchIndex"),
)
