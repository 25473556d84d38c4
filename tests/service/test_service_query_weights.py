"""`--query-weights idf` through the service and `vsparta search`, on both engines (embedded and a
real Elasticsearch node): the weights are count x IDF of the index's own statistics, the ranking
is the reference ranking of those weights, explanations add up to the scores, and the response
and /ready say which weighting ran."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from service_testdata import Corpus, expected_ranking

from vsparta.service.app import create_app
from vsparta.service.settings import ServiceSettings
from vsparta.termindex.scoring import idf_weights
from vsparta.termindex.weightings.registry import WEIGHTINGS

REPO = Path(__file__).resolve().parents[2]
QUERY = "a large red cube object object"


def reference_weights(corpus: Corpus, text: str) -> dict[int, float]:
    """count x IDF computed here from the documents themselves, not from any engine."""
    ids = corpus.tokenizer.tokenize(text)
    counts: dict[int, float] = {}
    for i in ids:
        counts[i] = counts.get(i, 0.0) + 1.0
    df = {t: sum(1 for d in corpus.docs if t in d.weights) for t in counts}
    return idf_weights(counts, df, len(corpus.docs))


def test_idf_weights_rank_explain_and_say_so(
    backend_spec: str, corpus: Corpus, make_settings: Callable[..., ServiceSettings]
) -> None:
    settings = make_settings(backend_spec, query_weights="idf")
    expected = reference_weights(corpus, QUERY)
    by_token = {corpus.tokenizer.id_to_token(t): w for t, w in expected.items()}
    assert by_token["object"] < by_token["large"] < by_token["red"]  # commoner weighs less
    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        assert c.get("/ready").json()["query_weights"] == "idf"
        body = c.post("/search", json={"query": QUERY, "k": 5, "explain": True}).json()
        plain = c.post("/search", json={"terms": {"red": 1.0}, "k": 1}).json()
    assert body["query_weighting"] == "idf"
    assert {w["token"]: w["weight"] for w in body["query_weights"]} == by_token
    want = expected_ranking(corpus, expected, 5)
    assert [r["id"] for r in body["results"]] == [doc_id for doc_id, _ in want]
    for r, (_, score) in zip(body["results"], want, strict=True):
        assert r["score"] == pytest.approx(score, rel=1e-6)
        total = math.fsum(t["contribution"] for t in r["terms"])
        assert total == pytest.approx(r["score"], rel=1e-6)
        for t in r["terms"]:
            boost = by_token[t["token"]]
            assert t["contribution"] == pytest.approx(boost * math.log1p(t["weight"]), rel=1e-9)
    assert plain["query_weighting"] == "terms"  # explicit weights are never re-weighted
    assert plain["query_weights"] == [{"token": "red", "weight": 1.0}]


def test_counts_stay_the_default(backend_spec: str, make_settings: Callable[..., ServiceSettings]) -> None:
    with TestClient(create_app(make_settings(backend_spec)), raise_server_exceptions=False) as c:
        assert c.get("/ready").json()["query_weights"] == "counts"
        body = c.post("/search", json={"query": QUERY, "k": 3}).json()
    assert body["query_weighting"] == "counts"
    weights = {w["token"]: w["weight"] for w in body["query_weights"]}
    assert weights["object"] == 2.0 and weights["red"] == 1.0


def test_a_weighting_other_than_counts_or_idf_is_refused(make_settings, embedded_spec: str) -> None:
    with pytest.raises(ValueError, match="query_weights"):
        make_settings(embedded_spec, query_weights="bm25")


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vsparta.cli", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", **(env or {})},
        timeout=120,
    )


def test_search_cli_query_weights(corpus: Corpus, embedded_spec: str) -> None:
    base = ["search", QUERY, "--backend", embedded_spec, "--model", str(corpus.model_dir), "-k", "2"]
    idf = _cli(*base, "--query-weights", "idf", "--json")
    assert idf.returncode == 0, idf.stderr
    body = json.loads(idf.stdout)
    assert body["query_weighting"] == "idf"
    expected = reference_weights(corpus, QUERY)
    assert {w["token"]: w["weight"] for w in body["query_weights"]} == {
        corpus.tokenizer.id_to_token(t): w for t, w in expected.items()
    }
    table = _cli(*base, env={"VSPARTA_QUERY_WEIGHTS": "idf"})
    assert table.returncode == 0, table.stderr
    assert "weights (idf): a " in table.stdout.splitlines()[0]
    wrong = _cli(*base, "--query-weights", "bm25")
    assert wrong.returncode == 2 and "invalid choice: 'bm25'" in wrong.stderr
    coord = _cli(*base, "--reranker", "coord", "--json", env={"VSPARTA_RERANKER": "none"})
    assert coord.returncode == 0, coord.stderr
    assert json.loads(coord.stdout)["reranker"] == "coord"  # the flag wins over the environment
    env_coord = _cli(*base, "--json", env={"VSPARTA_RERANKER": "coord"})
    assert json.loads(env_coord.stdout)["reranker"] == "coord"
    no_such = _cli(*base, env={"VSPARTA_RERANKER": "boost"})
    assert no_such.returncode == 2 and "unknown reranker 'boost': one of coord" in no_such.stderr
    env_wrong = _cli(*base, env={"VSPARTA_QUERY_WEIGHTS": "bm25"})
    assert env_wrong.returncode == 2 and "query_weights" in env_wrong.stderr
    assert "Traceback" not in env_wrong.stderr


def test_a_search_names_its_own_weighting_from_the_registry(
    backend_spec: str, corpus: Corpus, make_settings: Callable[..., ServiceSettings]
) -> None:
    """``GET /search/options`` lists every registered weighting; a request may name one."""
    with TestClient(create_app(make_settings(backend_spec)), raise_server_exceptions=False) as c:
        options = c.get("/search/options").json()
        names = [w["name"] for w in options["query_weightings"]]
        assert names == list(WEIGHTINGS.names()) and options["default_query_weighting"] == "counts"
        assert all(w["description"] for w in options["query_weightings"]) and options["reranker"] is None
        enum = c.get("/openapi.json").json()["components"]["schemas"]["SearchRequest"]["properties"]
        assert enum["query_weighting"]["enum"] == names
        idf = c.post("/search", json={"query": QUERY, "k": 5, "query_weighting": "idf"}).json()
        saturated = c.post("/search", json={"query": QUERY, "k": 5, "query_weighting": "saturated"}).json()
        wrong = c.post("/search", json={"query": QUERY, "query_weighting": "bm25"})
    assert idf["query_weighting"] == "idf"
    by_token = {corpus.tokenizer.id_to_token(t): w for t, w in reference_weights(corpus, QUERY).items()}
    assert {w["token"]: w["weight"] for w in idf["query_weights"]} == by_token
    weights = {w["token"]: w["weight"] for w in saturated["query_weights"]}
    assert weights == {"a": 1.0, "large": 1.0, "red": 1.0, "cube": 1.0, "object": 1.375}  # twice: 2.2*2/3.2
    assert wrong.status_code == 422 and wrong.json()["detail"][0]["loc"] == ["body", "query_weighting"]
