"""The ``search_server`` fixture: each engine line speaking the Elasticsearch protocol, in turn."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from elastic_testkit import ENGINE_LINES, SearchServer


@pytest.fixture(scope="session", params=list(ENGINE_LINES))
def search_server(request: pytest.FixtureRequest, opensearch_url_of: Callable[[str], str]) -> SearchServer:
    """Elasticsearch 7.17, OpenSearch 2.19 and 3.x: tests of the shared protocol run on each."""
    engine, line = ENGINE_LINES[request.param]
    url = request.getfixturevalue("es_url") if engine == "elasticsearch" else opensearch_url_of(line)
    return SearchServer(engine, url)
