"""Operations: metrics, readiness, OpenAPI, errors as JSON, settings from the environment."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from vsparta.service.app import create_app
from vsparta.service.docs import swagger_ui_version
from vsparta.service.matching import PRESENCE_JOINT, PRESENCE_PREDICTIVE
from vsparta.service.settings import ServiceSettings
from vsparta.termindex import MAX_QUERY_WEIGHT


def _sample(text: str, name: str, **labels: str) -> float:
    """Value of one Prometheus sample, 0 if absent."""
    for line in text.splitlines():
        if not line.startswith(name + "{"):
            continue
        labels_text, value = line[len(name) :].rsplit(" ", 1)
        got = dict(re.findall(r'(\w+)="([^"]*)"', labels_text))
        if all(got.get(k) == v for k, v in labels.items()):
            return float(value)
    return 0.0


def test_metrics_count_requests_and_time_stages(embedded_client: TestClient) -> None:
    for _ in range(3):
        assert embedded_client.post("/search", json={"query": "red cube"}).status_code == 200
    assert embedded_client.post("/search", json={"query": " "}).status_code == 422
    assert embedded_client.get("/images/nope").status_code == 404
    assert embedded_client.get("/no/such/route").status_code == 404
    r = embedded_client.get("/metrics")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    text = r.text
    counts = "vsparta_http_requests_total"
    assert _sample(text, counts, route="/search", method="POST", status="200") == 3
    assert _sample(text, counts, route="/search", method="POST", status="422") == 1
    assert _sample(text, counts, route="/images/{doc_id}", method="GET", status="404") == 1
    assert _sample(text, counts, route="unmatched", method="GET", status="404") == 1
    for stage in ("tokenize", "engine", "total"):
        assert _sample(text, "vsparta_search_stage_duration_seconds_count", stage=stage) >= 3
        assert _sample(text, "vsparta_search_stage_duration_seconds_sum", stage=stage) > 0
    assert _sample(text, "vsparta_http_request_duration_seconds_count", route="/search", method="POST") == 4


def test_each_app_has_its_own_registry(
    embedded_spec: str, make_settings: Callable[..., ServiceSettings]
) -> None:
    with (
        TestClient(create_app(make_settings(embedded_spec))) as a,
        TestClient(create_app(make_settings(embedded_spec))) as b,
    ):
        a.post("/search", json={"query": "red"})
        text = b.get("/metrics").text
        assert _sample(text, "vsparta_http_requests_total", route="/search", method="POST", status="200") == 0


def test_openapi_lists_every_route_with_examples(embedded_client: TestClient) -> None:
    spec = embedded_client.get("/openapi.json").json()
    paths = spec["paths"]
    for path, method in [
        ("/search", "post"),
        ("/images/{doc_id}", "get"),
        ("/images/{doc_id}/similar", "get"),
        ("/images/{doc_id}/file", "get"),
        ("/images/{doc_id}/thumbnail", "get"),
        ("/health", "get"),
        ("/ready", "get"),
        ("/metrics", "get"),
    ]:
        assert method in paths[path], path
    body = paths["/search"]["post"]["requestBody"]["content"]["application/json"]
    assert {"text", "explain", "terms"} <= set(body["examples"])
    assert "503" in paths["/search"]["post"]["responses"]
    assert "404" in paths["/images/{doc_id}"]["get"]["responses"]
    docs = embedded_client.get("/docs")
    assert docs.status_code == 200 and "swagger" in docs.text.lower()
    assert "cdn" not in docs.text  # works offline: the assets are served by the app itself
    for asset in ("/docs-assets/swagger-ui-bundle.js", "/docs-assets/swagger-ui.css"):
        assert asset in docs.text
        got = embedded_client.get(asset)
        assert got.status_code == 200 and len(got.content) > 10_000
    assert spec["openapi"].startswith("3.1")
    assert swagger_ui_version().split(".")[0] == "5"  # Swagger UI 4 cannot render OpenAPI 3.1
    redoc = embedded_client.get("/redoc")
    assert redoc.status_code == 200 and "/docs-assets/redoc.standalone.js" in redoc.text
    assert "cdn" not in redoc.text and "fonts.googleapis" not in redoc.text
    assert embedded_client.get("/docs-assets/redoc.standalone.js").status_code == 200
    icon = embedded_client.get("/favicon.ico")
    assert icon.status_code == 200 and icon.headers["content-type"] == "image/x-icon"
    assert icon.content[:4] == b"\x00\x00\x01\x00"  # an ICO file


def test_openapi_says_what_the_server_does(embedded_client: TestClient) -> None:
    c = embedded_client
    spec = c.get("/openapi.json").json()
    request = spec["components"]["schemas"]["SearchRequest"]
    # exactly one of the two, as an allOf so client generators still make a model (24.5)
    assert request["allOf"] == [{"oneOf": [{"required": ["query"]}, {"required": ["terms"]}]}]
    weight = request["properties"]["terms"]["additionalProperties"]
    assert weight["maximum"] == MAX_QUERY_WEIGHT and weight["exclusiveMinimum"] == 0
    search = spec["paths"]["/search"]["post"]["responses"]
    assert {"200", "413", "415", "422", "503"} <= set(search)
    for path, methods in spec["paths"].items():
        for method, op in methods.items():
            for status, answer in op["responses"].items():
                assert "content" in answer or status == "204", (method, path, status)  # a declared body
    schema_422 = search["422"]["content"]["application/json"]["schema"]["$ref"]
    assert schema_422 == "#/components/schemas/HTTPValidationError"
    # ids with control characters: refused by the schema, and the 422 has the declared shape
    doc_id = next(p for p in spec["paths"]["/images/{doc_id}"]["get"]["parameters"] if p["name"] == "doc_id")
    assert doc_id["schema"]["pattern"] == "^[^\\x00-\\x1f\\x7f]+$"
    for path in ("/images/a%01b", "/images/a%01b/file", "/images/a%7Fb/similar", "/images/a%1Fb/thumbnail"):
        r = c.get(path)
        assert r.status_code == 422, path
        assert isinstance(r.json()["detail"], list) and r.json()["detail"][0]["loc"][:2] == ["path", "doc_id"]
    # a body that is not UTF-8 is invalid JSON like any other: 422, not an undocumented 400
    r = c.post("/search", content=b'{"query": "\xff\xfe"}', headers={"content-type": "application/json"})
    assert r.status_code == 422 and r.json()["detail"][0]["type"] == "json_invalid"


def test_ready_is_503_until_the_index_exists(corpus, make_settings, tmp_path: Path) -> None:  # noqa: ANN001
    from vsparta.termindex import open_index

    spec = f"embedded:{tmp_path / 'later'}"
    with TestClient(create_app(make_settings(spec))) as c:
        assert c.get("/health").status_code == 200
        r = c.get("/ready")
        assert r.status_code == 503
        assert r.headers["retry-after"] == "5"
        assert r.json() == {
            "status": "not ready",
            "detail": "search index not found: nothing indexed yet, or wrong index name",
        }
        s = c.post("/search", json={"query": "red"})
        assert s.status_code == 503
        assert "index not found" in s.json()["detail"]
        assert str(tmp_path) not in r.text + s.text  # the log names the folder, clients do not
        index = open_index(spec, create=True)
        index.upsert(corpus.docs[:2])
        index.close()
        assert c.get("/ready").status_code == 200  # picked up without a restart
        body = {"query": "red", "require_match": False}  # both images are red: "red" is common
        assert c.post("/search", json=body).json()["results"][0]["id"] == "red-cube"


def test_unexpected_errors_are_generic_500(
    embedded_client: TestClient, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    engine = embedded_client.app.state.engine

    async def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("secret internal detail /etc/something")

    monkeypatch.setattr(engine, "search", broken)
    r = embedded_client.post("/search", json={"query": "red"})
    assert r.status_code == 500
    assert r.json() == {"detail": "internal server error"}
    assert "secret" not in r.text
    assert "secret internal detail" in caplog.text  # logged server-side


def test_cors_is_off_by_default_and_configurable(
    embedded_spec: str, make_settings: Callable[..., ServiceSettings]
) -> None:
    headers = {"Origin": "http://example.org", "Access-Control-Request-Method": "POST"}
    with TestClient(create_app(make_settings(embedded_spec))) as c:
        r = c.options("/search", headers=headers)
        assert "access-control-allow-origin" not in r.headers
    with TestClient(create_app(make_settings(embedded_spec, cors_origins=["http://example.org"]))) as c:
        r = c.options("/search", headers=headers)
        assert r.headers["access-control-allow-origin"] == "http://example.org"


def test_settings_from_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    monkeypatch.setenv("VSPARTA_BACKEND", "http://127.0.0.1:9200/vsparta")
    monkeypatch.setenv("VSPARTA_MODEL_PATH", str(tmp_path))
    monkeypatch.setenv("VSPARTA_IMAGE_ROOTS", f"{a}:{b}")
    monkeypatch.setenv("VSPARTA_MAX_K", "50")
    monkeypatch.setenv("VSPARTA_ENGINE_TIMEOUT_S", "1.5")
    monkeypatch.setenv("VSPARTA_CORS_ORIGINS", "http://x.org,http://y.org")
    monkeypatch.setenv("VSPARTA_MATCH_FUNCTION_WORDS", "true")
    monkeypatch.setenv("VSPARTA_MATCH_PLURAL_FLOORS", "false")
    monkeypatch.setenv("VSPARTA_MATCH_UNSEEN_FLOORS", "false")
    monkeypatch.setenv("VSPARTA_MATCH_PRESENCE_SCAN", "false")
    monkeypatch.setenv("VSPARTA_MATCH_RELATION_WORDS", "true")
    monkeypatch.setenv("VSPARTA_MATCH_PRESENCE_JOINT", str(not PRESENCE_JOINT).lower())
    monkeypatch.setenv("VSPARTA_MATCH_PRESENCE_PREDICTIVE", str(not PRESENCE_PREDICTIVE).lower())
    s = ServiceSettings()
    rule = s.model_copy(update={"match_term_floors": False}).match_rule(None)  # type: ignore[arg-type]
    assert rule.function_words_match and not ServiceSettings(match_function_words=False).match_function_words
    assert not rule.plural_floors and ServiceSettings(match_plural_floors=True).match_plural_floors
    assert not s.match_unseen_floors and ServiceSettings(match_unseen_floors=True).match_unseen_floors
    assert not s.match_presence_scan and ServiceSettings(match_presence_scan=True).match_presence_scan
    assert rule.relation_words_match and not ServiceSettings(match_relation_words=False).match_relation_words
    assert rule.presence_joint is not PRESENCE_JOINT
    assert rule.presence_predictive is not PRESENCE_PREDICTIVE
    assert s.backend == "http://127.0.0.1:9200/vsparta"
    assert s.image_roots == [a.resolve(), b.resolve()]
    assert (s.max_k, s.engine_timeout_s) == (50, 1.5)
    assert s.cors_origins == ["http://x.org", "http://y.org"]
    monkeypatch.setenv("VSPARTA_IMAGE_ROOTS", f'["{a}"]')
    assert ServiceSettings().image_roots == [a.resolve()]
    # init arguments (CLI flags) beat the environment
    assert ServiceSettings(max_k=7).max_k == 7


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("backend", "http://127.0.0.1:9200", "HOST:PORT/INDEX"),
        ("max_k", "0", "greater than or equal to 1"),
        ("thumbnail_sizes", "8", "thumbnail_sizes"),
        ("default_k", "500", "default_k"),
        (
            "max_query_tokens",
            str(int(MAX_QUERY_WEIGHT) + 1),
            f"less than or equal to {MAX_QUERY_WEIGHT:g}",
        ),  # repeats must stay in bound
    ],
)
def test_bad_settings_are_clear_errors(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, field: str, value: str, says: str
) -> None:
    monkeypatch.setenv("VSPARTA_MODEL_PATH", str(tmp_path))
    monkeypatch.setenv(f"VSPARTA_{field.upper()}", value)
    with pytest.raises(ValueError, match=re.escape(says)):
        ServiceSettings()


def test_lifespan_opens_and_closes_clients(
    embedded_spec: str, make_settings: Callable[..., ServiceSettings]
) -> None:
    app = create_app(make_settings(embedded_spec, thumbnail_cache_dir=None))
    with TestClient(app) as c:
        assert c.post("/search", json={"query": "red"}).status_code == 200
        assert c.get("/images/red-cube/thumbnail").status_code == 200
        engine, thumbs = app.state.engine, app.state.thumbnailer.cache_dir
        assert engine.reader._index is not None and thumbs.exists()
    assert engine.reader._index is None  # closed on shutdown
    assert not thumbs.exists()  # the temporary thumbnail cache is removed with the app


def test_slow_first_open_is_503_then_served(embedded_spec: str) -> None:
    """A request that arrives while the index is still opening gets 503; the open is not restarted."""
    import asyncio
    import time

    from vsparta.service.engines import ServiceEngine
    from vsparta.termindex import open_index
    from vsparta.termindex.errors import EngineUnavailable
    from vsparta.termindex.reader import ThreadedReader

    opened: list[float] = []

    def slow_open():  # noqa: ANN202
        time.sleep(1.0)
        opened.append(time.monotonic())
        return open_index(embedded_spec)

    async def scenario() -> None:
        engine = ServiceEngine(ThreadedReader(slow_open, open_wait_s=0.3), timeout_s=5.0)
        with pytest.raises(EngineUnavailable, match="still opening"):
            await engine.count()
        await asyncio.sleep(1.2)
        assert await engine.count() == 19
        assert len(opened) == 1
        await engine.close()

    asyncio.run(scenario())


def test_image_sub_resources_are_the_ids_the_indexer_refuses(embedded_client: TestClient) -> None:
    """An id ending in "/X" for a route ``/images/{doc_id}/X`` would be unreachable (24.4)."""
    from vsparta.core.ids import RESERVED_ID_SUFFIXES

    paths = embedded_client.get("/openapi.json").json()["paths"]
    prefix = "/images/{doc_id}"
    sub_resources = {p.removeprefix(prefix) for p in paths if p.startswith(prefix + "/")}
    assert sub_resources == set(RESERVED_ID_SUFFIXES)
