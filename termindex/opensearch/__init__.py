"""OpenSearch engine (2.19 and 3.x): the Elasticsearch engine's code over the same REST protocol.

OpenSearch answers the Elasticsearch 7.10 REST API, has ``rank_features`` and ``rank_feature``
queries (Lucene's ``FeatureField``: the same 9 significant bits per weight), aliases and bulk
loads, so the engine is ``ElasticsearchIndex`` with another client transport
(``opensearch.client``): the pinned 7.17 Python client, whose product check is turned around to
accept OpenSearch (and refuse Elasticsearch). Spec: ``opensearch+http://HOST:PORT/NAME``.
"""
