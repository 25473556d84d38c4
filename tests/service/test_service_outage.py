"""Elasticsearch going away mid-run: 503 with Retry-After, then recovery without a restart.

The service talks to the real node through a TCP proxy started here; stopping the proxy cuts
every connection (the shared node itself is never stopped). A backend URL that answers HTTP but
is not Elasticsearch is a real little web server started here.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import pytest
from fastapi.testclient import TestClient
from service_testdata import TcpProxy

from vsparta.service.app import create_app
from vsparta.service.settings import ServiceSettings


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


@pytest.mark.elasticsearch
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


@pytest.mark.elasticsearch
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


@pytest.mark.elasticsearch
def test_outage_logs_one_line_per_failure_and_one_traceback(
    proxied_client: TestClient, proxy: TcpProxy, caplog: pytest.LogCaptureFixture
) -> None:
    c = proxied_client
    assert _search(c)[0] == 200
    proxy.stop()
    caplog.clear()
    failures = 20
    with caplog.at_level(logging.WARNING):
        for _ in range(failures):
            assert _search(c)[0] == 503
        proxy.start()
        deadline = time.monotonic() + 20
        while _search(c)[0] != 200 and time.monotonic() < deadline:
            time.sleep(0.5)
    records = [r for r in caplog.records if r.levelno >= logging.WARNING]
    with_traceback = [r for r in records if r.exc_info]
    assert len(with_traceback) == 1  # the first failure of the outage
    failed = [r for r in records if "unavailable" in r.getMessage()]
    assert failures <= len(failed) <= failures + 40  # one per failed request (and retries above)
    assert not [r for r in records if r.name.startswith("elasticsearch")]  # the client's own repeats
    assert "available again" in records[-1].getMessage()
    # every record one line, except the one traceback (before: two ~44-line ones per request)
    lines = ["\n".join(logging.Formatter().format(r) for r in records)][0].splitlines()
    traceback_lines = len(logging.Formatter().format(with_traceback[0]).splitlines())
    assert len(lines) == len(records) - 1 + traceback_lines


class _NotElasticsearch(BaseHTTPRequestHandler):
    """Any web server: answers every request with a small HTML page."""

    def _answer(self) -> None:
        body = b"<html><body>hello</body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_HEAD = do_PUT = _answer  # noqa: N815

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def web_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NotElasticsearch)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_web_server_that_is_not_elasticsearch_is_503_naming_it(
    web_server: str, make_settings: Callable[..., ServiceSettings]
) -> None:
    settings = make_settings(f"{web_server}/vsparta", engine_timeout_s=2.0)
    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        for method, path, body in [
            ("POST", "/search", {"query": "red cube"}),
            ("GET", "/images/red-cube", None),
            ("GET", "/images/red-cube/similar", None),
            ("GET", "/images/red-cube/file", None),
        ]:
            r = c.request(method, path, json=body)
            assert r.status_code == 503, (path, r.text)
            assert "not Elasticsearch" in r.json()["detail"], r.text
            assert r.headers["retry-after"]
        assert c.get("/ready").status_code == 503
