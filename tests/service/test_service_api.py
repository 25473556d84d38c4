"""HTTP API against real indexes (embedded and Elasticsearch) holding the same documents."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from service_testdata import Corpus, expected_ranking

from vsparta.service.app import create_app


def test_search_text_query_ranks_like_the_reference(client: TestClient, corpus: Corpus) -> None:
    start = time.perf_counter()
    r = client.post("/search", json={"query": "red cube", "k": 5})
    wall_ms = (time.perf_counter() - start) * 1000
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["query_tokens"] == ["red", "cube"]
    # took_ms is the server's own time for this request: some of the client's wall time, never more
    assert 0 < body["took_ms"] <= wall_ms
    tok = corpus.tokenizer
    want = expected_ranking(corpus, {tok.token_to_id("red"): 1.0, tok.token_to_id("cube"): 1.0}, 5)
    got = [(h["id"], h["score"]) for h in body["results"]]
    assert [i for i, _ in got] == [i for i, _ in want]
    for (_, s_got), (_, s_want) in zip(got, want, strict=True):
        assert math.isclose(s_got, s_want, rel_tol=1e-2)  # ES keeps 9 significant bits
    top = body["results"][0]
    assert top["id"] == "red-cube"
    assert top["metadata"]["caption"].endswith("red cube")
    assert top["image_url"] == "/images/red-cube/file"
    assert top["thumbnail_url"] == "/images/red-cube/thumbnail"
    assert "terms" not in top


def test_search_repeated_token_counts_twice(client: TestClient, corpus: Corpus) -> None:
    r = client.post("/search", json={"query": "blue blue sphere", "k": 1, "explain": True})
    assert r.status_code == 200, r.text
    hit = r.json()["results"][0]
    assert hit["id"] == "blue-sphere"
    blue = next(t for t in hit["terms"] if t["token"] == "blue")
    assert math.isclose(blue["contribution"], 2 * math.log1p(blue["weight"]), rel_tol=1e-2)


def test_search_explain_lists_matched_terms(client: TestClient) -> None:
    r = client.post("/search", json={"query": "green cylinder", "k": 3, "explain": True})
    assert r.status_code == 200, r.text
    results = r.json()["results"]
    assert results[0]["id"] == "green-cylinder"
    terms = results[0]["terms"]
    assert {t["token"] for t in terms} == {"green", "cylinder"}
    contributions = [t["contribution"] for t in terms]
    assert contributions == sorted(contributions, reverse=True)
    for t in terms:
        assert math.isclose(t["contribution"], math.log1p(t["weight"]), rel_tol=1e-2)
    assert math.isclose(sum(contributions), results[0]["score"], rel_tol=1e-2)
    # other results matched only one of the two words
    assert all(len(r["terms"]) == 1 for r in results[1:])


def test_search_explicit_terms(client: TestClient) -> None:
    r = client.post("/search", json={"terms": {"yellow": 1.0, "sphere": 3.0}, "k": 2, "explain": True})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["query_tokens"] == ["yellow", "sphere"]
    assert body["results"][0]["id"] == "yellow-sphere"
    sphere = next(t for t in body["results"][0]["terms"] if t["token"] == "sphere")
    assert math.isclose(sphere["contribution"], 3.0 * math.log1p(sphere["weight"]), rel_tol=1e-2)


def test_search_no_match_is_empty(client: TestClient) -> None:
    r = client.post("/search", json={"query": "zebra"})
    assert r.status_code == 200
    assert r.json()["results"] == []


def test_search_default_k_and_max_k(client: TestClient) -> None:
    # "object" is in 12 of the 19 images: common, so only require_match: false ranks them all
    r = client.post("/search", json={"query": "object", "require_match": False})
    assert len(r.json()["results"]) == 10
    r = client.post("/search", json={"query": "object", "k": 100, "require_match": False})
    assert r.status_code == 200
    assert len(r.json()["results"]) == 12


def test_image_detail(client: TestClient) -> None:
    r = client.get("/images/blue-cube")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["id"] == "blue-cube"
    assert body["image_url"] == "/images/blue-cube/file"
    tokens = [t["token"] for t in body["terms"]]
    assert tokens[:2] == ["cube", "blue"]  # heaviest first
    assert set(tokens) == {"cube", "blue", "small", "object"}
    assert client.get("/images/blue-cube", params={"top": 1}).json()["terms"] == body["terms"][:1]


def test_similar_excludes_itself(client: TestClient) -> None:
    r = client.get("/images/red-sphere/similar", params={"k": 4})
    assert r.status_code == 200, r.text
    ids = [h["id"] for h in r.json()["results"]]
    assert "red-sphere" not in ids
    assert len(ids) == 4
    # shares "sphere" (heaviest term) with the other spheres, and "red" with the other reds
    assert set(ids[:3]) == {"blue-sphere", "green-sphere", "yellow-sphere"}
    assert ids[3].startswith("red-")
    assert "sphere" in r.json()["query_tokens"]


def test_image_file_and_thumbnail(client: TestClient) -> None:
    r = client.get("/images/red-cube/file")
    assert r.status_code == 200
    assert r.headers["content-type"] == "image/png"
    assert r.content.startswith(b"\x89PNG")
    r = client.get("/images/red-cube/thumbnail", params={"size": 40})
    assert r.status_code == 200
    assert r.headers["content-type"] == "image/jpeg"
    assert r.content.startswith(b"\xff\xd8")
    from io import BytesIO

    from PIL import Image

    with Image.open(BytesIO(r.content)) as im:
        assert max(im.size) <= 128  # size 40 rounds up to the smallest configured size (128)
    again = client.get("/images/red-cube/thumbnail", params={"size": 40})
    assert again.content == r.content


@pytest.mark.parametrize(
    "path",
    [
        "/images/nope",
        "/images/nope/similar",
        "/images/nope/file",
        "/images/nope/thumbnail",
    ],
)
def test_unknown_id_is_404(client: TestClient, path: str) -> None:
    r = client.get(path)
    assert r.status_code == 404
    assert "detail" in r.json()


@pytest.mark.parametrize(
    "doc_id",
    ["escape-relative", "escape-absolute", "escape-symlink", "not-an-image", "missing-file", "no-image"],
)
@pytest.mark.parametrize("kind", ["file", "thumbnail"])
def test_files_outside_the_image_roots_are_never_served(client: TestClient, doc_id: str, kind: str) -> None:
    r = client.get(f"/images/{doc_id}/{kind}")
    assert r.status_code == 404, r.text
    assert b"PNG" not in r.content and b"\xff\xd8" not in r.content


@pytest.mark.parametrize(
    "path",
    [
        "/images/..%2F..%2Fsecret.png/file",
        "/images/%2e%2e/file",
        "/images/..%2Fsecret.png/thumbnail",
        "/static/..%2F..%2F..%2Fetc%2Fpasswd",
        "/static/../../secret.png",
    ],
)
def test_path_traversal_in_urls_is_404(client: TestClient, path: str) -> None:
    r = client.get(path)
    assert r.status_code == 404
    assert b"root:" not in r.content and b"PNG" not in r.content


def test_unreadable_image_thumbnail_is_404_but_file_is_served(client: TestClient) -> None:
    assert client.get("/images/broken-file/thumbnail").status_code == 404
    assert client.get("/images/broken-file/file").status_code == 200  # bytes as stored, under the root


def test_health_and_ready(client: TestClient) -> None:
    assert client.get("/health").json() == {"status": "ok"}
    r = client.get("/ready")
    assert r.status_code == 200
    assert r.json()["status"] == "ready"
    assert "19 documents" in r.json()["detail"]


def test_ids_with_slashes_work_on_every_image_route(corpus, make_settings, tmp_path: Path) -> None:  # noqa: ANN001
    """Manifest ids such as 'val2014/000123.jpg' are common: they must survive the URL."""
    from vsparta.termindex import TermDocument, open_index

    source = corpus.docs[0]
    slashed = TermDocument("val2014/sub dir/0001.jpg", dict(source.weights), dict(source.metadata))
    other = TermDocument("val2014/0002.jpg", dict(corpus.docs[1].weights), dict(corpus.docs[1].metadata))
    spec = f"embedded:{tmp_path / 'slashed'}"
    with open_index(spec, create=True) as index:
        index.upsert([slashed, other])
    with TestClient(create_app(make_settings(spec)), raise_server_exceptions=False) as c:
        body = {"terms": {"object": 1.0}, "k": 5, "require_match": False}  # in both images: common
        hit = c.post("/search", json=body).json()["results"][0]
        assert hit["image_url"].startswith("/images/val2014%2F")
        for url in (hit["image_url"], hit["thumbnail_url"], hit["image_url"].removesuffix("/file")):
            assert c.get(url).status_code == 200, url
        detail = c.get("/images/val2014/sub%20dir/0001.jpg").json()
        assert detail["id"] == slashed.id
        similar = c.get("/images/val2014/sub%20dir/0001.jpg/similar?k=5").json()["results"]
        assert [r["id"] for r in similar] == [other.id]
        assert c.get("/images/val2014/nope.jpg").status_code == 404
