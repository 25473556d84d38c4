"""The one search pipeline (``vsparta.service.search``): its hooks, and one response for HTTP and CLI."""

from __future__ import annotations

import argparse
import io
import json
from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient
from service_testdata import Corpus

from vsparta.service import cli_search
from vsparta.service.app import create_app
from vsparta.service.search import WeightedQuery
from vsparta.service.settings import ServiceSettings
from vsparta.termindex import Hit
from vsparta.termindex.weightings.base import QueryWeighting


class Reverse:
    """A real re-ranker: takes twice the candidates and puts the weakest first."""

    name = "reverse"
    description = "the weakest of 2 x k first"

    def __init__(self) -> None:
        self.seen: list[tuple[list[str], int]] = []

    def candidates(self, k: int) -> int:
        return 2 * k

    async def rerank(self, query: WeightedQuery, hits: list[Hit], k: int) -> list[Hit]:
        self.seen.append((query.tokens, len(hits)))
        return list(reversed(hits))[:k]


def test_reranker_gets_more_candidates_and_decides_the_order(
    embedded_spec: str, make_settings: Callable[..., ServiceSettings]
) -> None:
    settings = make_settings(embedded_spec)
    with TestClient(create_app(settings), raise_server_exceptions=False) as plain:
        engine_order = [
            r["id"] for r in plain.post("/search", json={"query": "red cube", "k": 4}).json()["results"]
        ]
    assert len(engine_order) == 4
    reverse = Reverse()
    with TestClient(create_app(settings, reranker=reverse), raise_server_exceptions=False) as c:
        body = c.post("/search", json={"query": "red cube", "k": 2}).json()
        assert [r["id"] for r in body["results"]] == engine_order[::-1][:2]
        assert body["query_tokens"] == ["red", "cube"] and body["reranker"] == "reverse"
        similar = c.get("/images/red-cube/similar", params={"k": 1})
        assert similar.status_code == 200 and len(similar.json()["results"]) == 1
        metrics = c.get("/metrics").text
    assert reverse.seen[0] == (["red", "cube"], 4)  # 2 * k candidates reached the hook
    assert len(reverse.seen) == 2  # more like this goes through the same stage
    assert 'vsparta_search_stage_duration_seconds_count{stage="rerank"} 2.0' in metrics


def test_query_weighting_is_what_the_engine_is_sent(
    embedded_spec: str, make_settings: Callable[..., ServiceSettings]
) -> None:
    double = QueryWeighting("double", "twice the count", lambda counts, df, n_docs: 2.0 * counts)

    settings = make_settings(embedded_spec)
    query = {"query": "red cube", "k": 3, "explain": True}
    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        answer = c.post("/search", json=query).json()
        plain = answer["results"]
        assert "reranker" not in answer  # none ran
        explicit = c.post("/search", json={"terms": {"red": 1.0, "cube": 1.0}, "k": 3}).json()["results"]
    with TestClient(create_app(settings, weighting=double), raise_server_exceptions=False) as c:
        doubled = c.post("/search", json=query).json()["results"]
        # explicit terms are the client's own weights: never re-weighted
        same = c.post("/search", json={"terms": {"red": 1.0, "cube": 1.0}, "k": 3}).json()["results"]
    assert [r["id"] for r in doubled] == [r["id"] for r in plain]
    for a, b in zip(plain, doubled, strict=True):
        assert b["score"] == pytest.approx(2 * a["score"], rel=1e-5)
    assert same == explicit


def test_cli_and_http_build_the_same_response(
    corpus: Corpus,
    embedded_spec: str,
    make_settings: Callable[..., ServiceSettings],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VSPARTA_IMAGE_ROOTS", str(corpus.image_root))
    parser = argparse.ArgumentParser()
    cli_search.add_arguments(parser)
    args = parser.parse_args(
        ["blue sphere", "--backend", embedded_spec, "--model", str(corpus.model_dir), "-k", "3"]
        + ["--explain", "--json"]
    )
    out = io.StringIO()
    assert cli_search.run(args, out) == 0
    from_cli = json.loads(out.getvalue())
    with TestClient(create_app(make_settings(embedded_spec)), raise_server_exceptions=False) as c:
        from_http = c.post("/search", json={"query": "blue sphere", "k": 3, "explain": True}).json()
    from_cli.pop("took_ms")
    from_http.pop("took_ms")
    assert from_cli == from_http
    assert from_http["results"][0]["image_url"]  # the file exists: both offer its URL
