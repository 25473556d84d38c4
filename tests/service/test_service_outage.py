"""Elasticsearch going away mid-run: 503 with Retry-After, then recovery without a restart.

The service talks to the real node through a TCP proxy started here; stopping the proxy cuts
every connection (the shared node itself is never stopped). A backend URL that answers HTTP but
is not Elasticsearch is a real little web server started here.
"""

from __future__ import annotations

import http.client
import json
import logging
import re
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from fastapi.testclient import TestClient
from service_testdata import Corpus, TcpProxy, running_server, serve_args

from vsparta.service.app import create_app
from vsparta.service.engines import OutageLog
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
def test_outage_logs_first_failure_then_recovery_in_one_line_each(
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
    assert not [r for r in records if r.exc_info]  # the traceback only at DEBUG (-v)
    assert not [r for r in records if r.name.startswith("elasticsearch")]  # the client's own repeats
    # well under the summary interval: the first failure and the recovery, nothing in between
    assert [r.name for r in records] == ["vsparta.service.outage"] * 2, [r.getMessage() for r in records]
    first, back = (r.getMessage() for r in records)
    assert first.startswith("POST /search: search engine unreachable: ")
    assert len(first) > len("POST /search: search engine unreachable: ") + 10  # with its reason
    assert re.fullmatch(r"search engine available again after [\d.]+ s \((\d+) requests answered 503\)", back)
    assert int(re.findall(r"\((\d+) requests", back)[0]) >= failures
    assert all("\n" not in logging.Formatter().format(r) for r in records)


def test_outage_log_summarizes_per_interval_and_stays_quiet_while_flapping(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The state machine alone, with real exceptions, on a clock of its own (a loaded machine
    must not decide which failures fall into which interval)."""
    now = [1000.0]
    outage = OutageLog(interval_s=0.2, clock=lambda: now[0])
    reason = ConnectionRefusedError(111, "Connection refused")
    with caplog.at_level(logging.DEBUG, logger="vsparta.service.outage"):
        outage.failed("POST /search", reason)
        n = 1
        for _ in range(500):  # 0.5 s of failures, one per millisecond
            now[0] += 0.001
            outage.failed("POST /search", reason)
            n += 1
        outage.recovered()
        for _ in range(50):  # a flapping engine: failures and successes right after the recovery
            now[0] += 0.0001
            outage.failed("GET /ready", reason)
            outage.recovered()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    debug = [r for r in caplog.records if r.levelno == logging.DEBUG]
    assert warnings[0] == "POST /search: search engine unreachable: [Errno 111] Connection refused"
    assert len(debug) == 1 and debug[0].exc_info  # the traceback, for -v
    summaries = [m for m in warnings if "in the last" in m]
    assert 1 <= len(summaries) <= 3, warnings  # 0.5 s at one per 0.2 s
    counted = sum(
        int(re.findall(r"unreachable: ([\d,]+) requests", m)[0].replace(",", "")) for m in summaries
    )
    assert counted <= n - 1
    assert warnings[len(summaries) + 1].startswith("search engine available again")
    assert f"({n:,} requests answered 503)" in warnings[len(summaries) + 1]
    assert len(warnings) == len(summaries) + 2  # the flaps within the interval added no line
    now[0] += 0.25
    outage.failed("POST /search", reason)  # a new outage, after the interval: announced again
    last = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING][-1]
    assert last.endswith("(before it, 50 requests answered 503 in brief outages)"), last


def _hammer(url: str, stop: threading.Event, statuses: list[int]) -> None:
    """One client: POST /search and GET /images/... on a kept-alive connection until ``stop``."""
    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname or "127.0.0.1", u.port, timeout=30)
    body = json.dumps({"query": "red cube", "k": 3})
    headers = {"content-type": "application/json"}
    while not stop.is_set():
        if len(statuses) % 4 == 3:
            conn.request("GET", "/images/red-cube/similar")
        else:
            conn.request("POST", "/search", body=body, headers=headers)
        response = conn.getresponse()
        response.read()
        statuses.append(response.status)
    conn.close()


@pytest.mark.slow
@pytest.mark.elasticsearch
def test_outage_log_volume_is_bounded_for_many_clients(
    corpus: Corpus, elastic_spec: str, proxy: TcpProxy
) -> None:
    """A real `vsparta serve`, its engine cut for 22 s while 48 clients keep asking: the bytes its
    log grows by stay under 10 KB per minute (it was ~260 bytes per failed request)."""
    name = elastic_spec.rsplit("/", 1)[1]
    args = serve_args(corpus, f"http://127.0.0.1:{proxy.port}/{name}")
    with running_server([*args, "--engine-timeout", "2"]) as (url, proc):
        log_path: Path = proc.log_path  # type: ignore[attr-defined]
        with urllib.request.urlopen(f"{url}/ready", timeout=10) as r:
            assert r.status == 200
        before = log_path.stat().st_size
        proxy.stop()
        start = time.monotonic()
        stop, statuses = threading.Event(), []  # list.append is atomic: shared by the threads
        clients = [threading.Thread(target=_hammer, args=(url, stop, statuses)) for _ in range(48)]
        for t in clients:
            t.start()
        time.sleep(22)
        stop.set()
        for t in clients:
            t.join(timeout=60)
        proxy.start()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{url}/ready", timeout=10) as r:
                    if r.status == 200:
                        break
            except urllib.error.HTTPError:
                time.sleep(0.5)
        elapsed = time.monotonic() - start
        time.sleep(0.5)  # let the recovery line reach the file
        logged = log_path.read_bytes()[before:].decode()
    failed = statuses.count(503)
    assert failed > 2000 and set(statuses) == {503}, (failed, set(statuses))
    per_minute = len(logged.encode()) * 60 / elapsed
    assert per_minute < 10_240, logged
    lines = logged.splitlines()
    assert "search engine unreachable: " in lines[0] and "Traceback" not in logged
    summaries = [line for line in lines if "requests answered 503 in the last" in line]
    assert 1 <= len(summaries) <= 3, logged  # one per 10 s of the 22 s
    assert "search engine available again after" in lines[-1], logged
    recovered = int(re.findall(r"\(([\d,]+) requests answered 503\)", lines[-1])[0].replace(",", ""))
    assert recovered >= failed  # every 503 is counted (the readiness probes too)
    print(
        f"{failed} requests answered 503 in {elapsed:.1f} s; log grew {len(logged)} bytes "
        f"({per_minute:.0f} bytes/minute); before: ~260 bytes per failed request"
    )


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
