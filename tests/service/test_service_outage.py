"""Elasticsearch going away mid-run: 503 with Retry-After, then recovery without a restart.

The service talks to the real node through a TCP proxy started here; stopping the proxy cuts
every connection (the shared node itself is never stopped).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from urllib.parse import urlsplit

import pytest
from fastapi.testclient import TestClient
from service_testdata import TcpProxy

from service.app import create_app
from service.settings import ServiceSettings

pytestmark = pytest.mark.elasticsearch


@pytest.fixture
def proxy(es_url: str) -> Iterator[TcpProxy]:
    u = urlsplit(es_url)
    p = TcpProxy((u.hostname or "127.0.0.1", u.port or 9200)).start()
    yield p
    p.stop()


@pytest.fixture
def proxied_client(
    proxy: TcpProxy, elastic_spec: str, make_settings: Callable[..., ServiceSettings]
) -> Iterator[TestClient]:
    name = elastic_spec.rsplit("/", 1)[1]
    settings = make_settings(f"http://127.0.0.1:{proxy.port}/{name}", engine_timeout_s=2.0, retry_after_s=3)
    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        yield c


def _search(c: TestClient) -> tuple[int, dict[str, str], dict]:
    r = c.post("/search", json={"query": "red cube", "k": 3})
    return r.status_code, dict(r.headers), r.json()


def test_engine_down_gives_503_then_recovers_without_restart(
    proxied_client: TestClient, proxy: TcpProxy
) -> None:
    c = proxied_client
    status, _, body = _search(c)
    assert status == 200 and body["results"][0]["id"] == "red-cube"
    assert c.get("/ready").status_code == 200

    proxy.stop()
    status, headers, body = _search(c)
    assert status == 503
    assert headers["retry-after"] == "3"
    assert body == {"detail": "search backend unavailable, retry later"}
    for path in ("/images/red-cube", "/images/red-cube/similar", "/images/red-cube/thumbnail"):
        r = c.get(path)
        assert r.status_code == 503, path
        assert r.headers["retry-after"] == "3"
    r = c.get("/ready")
    assert r.status_code == 503 and r.json()["status"] == "not ready"
    assert c.get("/health").status_code == 200  # the process itself is fine

    proxy.start()  # same port: the node is back
    deadline = time.monotonic() + 20
    while (status := _search(c)[0]) != 200 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert status == 200
    assert c.get("/ready").status_code == 200
    metrics = c.get("/metrics").text
    assert 'vsparta_http_requests_total{method="POST",route="/search",status="503"}' in metrics


def test_engine_hanging_times_out_as_503(proxied_client: TestClient, proxy: TcpProxy) -> None:
    c = proxied_client
    assert _search(c)[0] == 200
    proxy.stop()
    proxy.start(hang=True)  # accepts, never answers
    start = time.monotonic()
    status, headers, _ = _search(c)
    elapsed = time.monotonic() - start
    assert status == 503
    assert headers["retry-after"] == "3"
    assert elapsed < 10  # bounded by the engine timeout (2 s), not the client's default
    proxy.stop()
    proxy.start()
    deadline = time.monotonic() + 20
    while (status := _search(c)[0]) != 200 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert status == 200
