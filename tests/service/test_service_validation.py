"""Every invalid input gets a 422 (or 413) that says what is wrong, never a 500 or a stack trace."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from vsparta.service.app import create_app
from vsparta.service.settings import ServiceSettings
from vsparta.termindex.base import MAX_ID_LENGTH, MAX_QUERY_WEIGHT

_DEFAULTS = ServiceSettings.model_fields
MAX_QUERY_CHARS = _DEFAULTS["max_query_chars"].default
MAX_K = _DEFAULTS["max_k"].default
MAX_BODY_BYTES = _DEFAULTS["max_body_bytes"].default


def _messages(r: Any) -> str:
    detail = r.json()["detail"]
    return " | ".join(e["msg"] for e in detail) if isinstance(detail, list) else detail


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"query": ""}, "at least 1 character"),
        ({"query": "   \t\n "}, "empty or only whitespace"),
        ({"query": "x" * (MAX_QUERY_CHARS + 1)}, f"at most {MAX_QUERY_CHARS} characters"),
        ({"query": "red", "k": 0}, "greater than or equal to 1"),
        ({"query": "red", "k": -3}, "greater than or equal to 1"),
        ({"query": "red", "k": MAX_K + 1}, f"less than or equal to {MAX_K}"),
        ({"query": "red", "k": "10"}, "valid integer"),
        ({"query": "red", "k": 2.5}, "valid integer"),
        ({"query": "red", "k": None}, "valid integer"),
        ({"query": None, "terms": {"red": 1.0}}, "valid string"),  # null is not "absent"
        ({"query": "red", "fields": ["score"]}, "unknown field 'score'"),
        ({"query": "red", "fields": ["metadata."]}, "unknown field"),
        ({"query": "red", "explain": "yes"}, "valid boolean"),
        ({"query": 42}, "valid string"),
        ({"query": ["red"]}, "valid string"),
        ({"query": "red", "limit": 5}, "Extra inputs are not permitted"),
        ({"query": "red", "terms": {"red": 1.0}}, "not both or neither"),
        ({}, "not both or neither"),
        ({"k": 5}, "not both or neither"),
        ({"terms": {}}, "at least 1 item"),
        ({"terms": {"red": 0}}, "greater than 0"),
        ({"terms": {"red": -1.5}}, "greater than 0"),
        ({"terms": {"red": 3.5e38}}, f"less than or equal to {MAX_QUERY_WEIGHT:g}"),
        ({"terms": {"red": 1e308}}, f"less than or equal to {MAX_QUERY_WEIGHT:g}"),
        ({"terms": {"": 1.0}}, "at least 1 character"),
        ({"terms": {"red": "heavy"}}, "valid number"),
        ({"terms": ["red", "cube"]}, "valid dictionary"),
        ({"terms": {"red": 1.0, "qwertyzzx": 1.0}}, "unknown token 'qwertyzzx'"),
        ({"query": "red", "min_score": -0.5}, "greater than or equal to 0"),
        ({"query": "red", "min_score": "1"}, "valid number"),
        ({"query": "red", "require_match": "no"}, "valid boolean"),
        ({"query": "red", "query_weighting": "bm25"}, "Input should be 'counts'"),
    ],
)
def test_invalid_search_bodies_are_422(embedded_client: TestClient, body: dict[str, Any], says: str) -> None:
    r = embedded_client.post("/search", json=body)
    assert r.status_code == 422, r.text
    assert says in _messages(r), r.text
    assert "Traceback" not in r.text


def test_unknown_token_error_names_each_token(embedded_client: TestClient) -> None:
    r = embedded_client.post("/search", json={"terms": {"red": 1.0, "zzqx": 1.0, "qqzx": 2.0}})
    assert r.status_code == 422
    locs = [e["loc"] for e in r.json()["detail"]]
    assert ["body", "terms", "zzqx"] in locs and ["body", "terms", "qqzx"] in locs


def test_nan_weight_is_422(embedded_client: TestClient) -> None:
    r = embedded_client.post(
        "/search", content=b'{"terms": {"red": NaN}}', headers={"content-type": "application/json"}
    )
    assert r.status_code == 422
    assert "Traceback" not in r.text


@pytest.mark.parametrize(
    ("content", "content_type"),
    [
        (b"{not json", "application/json"),
        (b"", "application/json"),
        (b'"red cube"', "application/json"),
    ],
)
def test_malformed_bodies_are_422(embedded_client: TestClient, content: bytes, content_type: str) -> None:
    r = embedded_client.post("/search", content=content, headers={"content-type": content_type})
    assert r.status_code == 422, r.text


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data", None]
)
def test_a_body_not_sent_as_json_is_415_naming_the_type(
    embedded_client: TestClient, content_type: str | None
) -> None:
    headers = {"content-type": content_type} if content_type else {}
    r = embedded_client.post("/search", content=b'{"query": "red cube"}', headers=headers)
    assert r.status_code == 415, r.text
    assert r.json()["detail"].startswith("the body must be JSON sent as Content-Type: application/json (got ")
    assert (content_type or "no Content-Type") in r.json()["detail"]
    ok = embedded_client.post(
        "/search",
        content=b'{"query": "red cube"}',
        headers={"content-type": "application/json; charset=utf-8"},
    )
    assert ok.status_code == 200  # parameters and +json types stay welcome
    vendor = embedded_client.post(
        "/search", content=b'{"query": "red cube"}', headers={"content-type": "application/vnd.api+json"}
    )
    assert vendor.status_code == 200


@pytest.mark.parametrize("depth", [10, 900, 1000, 5000, 20_000])
def test_deeply_nested_json_is_422_like_other_body_errors(embedded_client: TestClient, depth: int) -> None:
    body = '{"query": "red", "fields": ' + "[" * depth + "]" * depth + "}"
    r = embedded_client.post("/search", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    (error,) = r.json()["detail"]
    assert set(error) == {"loc", "msg", "type"} and error["loc"][0] == "body"
    if error["type"] == "json_invalid":  # too deep for the parser
        assert error["msg"] == "body is not valid JSON: nested too deeply"


def test_head_root_answers_like_get(embedded_client: TestClient) -> None:
    get, head = embedded_client.get("/"), embedded_client.head("/")
    assert head.status_code == get.status_code == 200
    assert head.headers["content-type"] == get.headers["content-type"]
    assert head.headers["content-length"] == get.headers["content-length"] == str(len(get.content))
    assert head.content == b""


@pytest.mark.parametrize(
    ("path", "params"),
    [
        ("/images/red-cube/similar", {"k": 0}),
        ("/images/red-cube/similar", {"k": 101}),
        ("/images/red-cube/similar", {"k": "many"}),
        ("/images/red-cube/thumbnail", {"size": 8}),
        ("/images/red-cube/thumbnail", {"size": 100000}),
        ("/images/red-cube", {"top": 0}),
    ],
)
def test_invalid_query_parameters_are_422(
    embedded_client: TestClient, path: str, params: dict[str, Any]
) -> None:
    r = embedded_client.get(path, params=params)
    assert r.status_code == 422, r.text


def test_id_longer_than_the_limit_is_422(embedded_client: TestClient) -> None:
    assert embedded_client.get("/images/" + "a" * (MAX_ID_LENGTH + 1)).status_code == 422


def test_body_over_the_limit_is_413(embedded_client: TestClient) -> None:
    big = {"query": "red", "pad": "x" * (MAX_BODY_BYTES + 1)}
    r = embedded_client.post("/search", json=big)
    assert r.status_code == 413
    assert "larger than" in r.json()["detail"]


def test_streamed_body_over_the_limit_is_413(embedded_client: TestClient) -> None:
    def chunks() -> Any:
        for _ in range(MAX_BODY_BYTES // 1024 + 1):
            yield b"x" * 1024

    r = embedded_client.post("/search", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413


def test_limits_follow_the_settings(
    embedded_spec: str, make_settings: Callable[..., ServiceSettings]
) -> None:
    settings = make_settings(embedded_spec, max_k=3, max_query_chars=10, max_body_bytes=300)
    with TestClient(create_app(settings)) as c:
        assert c.post("/search", json={"query": "red", "k": 3}).status_code == 200
        assert c.post("/search", json={"query": "red", "k": 4}).status_code == 422
        assert c.post("/search", json={"query": "red cube sphere"}).status_code == 422
        assert c.post("/search", json={"query": "red", "pad": "x" * 400}).status_code == 413
        schema = c.get("/openapi.json").json()["components"]["schemas"]["SearchRequest"]
        assert schema["properties"]["k"]["maximum"] == 3
        assert schema["properties"]["query"]["maxLength"] == 10
