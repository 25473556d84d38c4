"""Search that says when nothing matches (``service.matching``), on every engine's own statistics:
embedded (its postings), Elasticsearch 7.17 and OpenSearch 2.19 / 3.x (``rank_feature`` hit counts).

The corpus (``service_testdata``): 19 images; "red" in 3, "cube" in 4, "large" in 6 (weight 1.0),
"object" in 12 (weight 0.5: common, held by more than half), no "zebra" anywhere.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from service_testdata import Corpus

from vsparta.service.app import create_app
from vsparta.service.settings import ServiceSettings

REPO = Path(__file__).resolve().parents[2]


def held(corpus: Corpus, word: str) -> int:
    """How many of the corpus's documents hold ``word``, counted here, not by any engine."""
    t = corpus.tokenizer.token_to_id(word)
    return sum(1 for d in corpus.docs if t in d.weights)


def search(c: TestClient, **body: Any) -> dict[str, Any]:
    r = c.post("/search", json=body)
    assert r.status_code == 200, r.text
    return r.json()


def test_every_answer_counts_its_words_in_the_index(every_engine_client: TestClient, corpus: Corpus) -> None:
    body = search(every_engine_client, query="a large red zebra object", k=5, explain=True)
    assert body["indexed_images"] == len(corpus.docs) == 19
    stats = {w["word"]: w for w in body["query_word_stats"]}
    assert list(stats) == ["a", "large", "red", "zebra", "object"]  # query order
    for word, w in stats.items():
        assert w["images"] == held(corpus, word) and w["tokens"] == [word]
    assert [w for w, s in stats.items() if s["common"]] == ["object"]  # 12 of 19
    assert stats["zebra"]["images"] == 0 and stats["zebra"]["results"] == 0
    assert stats["red"]["results"] == 3 and stats["object"]["results"] == 0  # common: never a match
    assert "no_match" not in body and [r["id"] for r in body["results"]][:1] == ["red-cube"]
    for r in body["results"]:  # results keep their explanations: they add up to the score
        assert math.isclose(sum(t["contribution"] for t in r["terms"]), r["score"], rel_tol=1e-6)


def test_a_word_no_image_has_is_an_answer(every_engine_client: TestClient) -> None:
    body = search(every_engine_client, query="zebra")
    assert body["results"] == [] and body["left_out"] == 0
    assert body["no_match"] == {"reason": "No image has zebra.", "words": ["zebra"], "common": []}


def test_only_common_words_match_nothing_unless_asked(every_engine_client: TestClient) -> None:
    body = search(every_engine_client, query="object", k=5)
    assert body["results"] == [] and body["left_out"] == 10  # the 2 x k the engine ranked
    assert body["no_match"] == {
        "reason": "object is in 12 of the 19 images and does not rank. No other word tells the images apart.",
        "words": [],
        "common": ["object"],
    }
    before = search(every_engine_client, query="object", k=5, require_match=False)  # the old behaviour
    assert len(before["results"]) == 5 and "no_match" not in before and before["left_out"] == 0
    # a common word beside a telling one: the telling one decides, the common one still scores
    mixed = search(every_engine_client, query="object zebra purple", k=20)
    assert {r["id"] for r in mixed["results"]} == {
        "escape-relative", "escape-absolute", "escape-symlink", "missing-file", "broken-file",
        "not-an-image", "no-image",
    }  # fmt: skip


def test_a_text_without_a_known_word_is_an_answer_not_an_error(every_engine_client: TestClient) -> None:
    body = search(every_engine_client, query="☃ ☃")
    assert body["results"] == [] and body["query_tokens"] == [] and body["indexed_images"] == 19
    assert body["no_match"]["reason"] == "No word of the query is in the model's vocabulary."


def test_min_score_leaves_out_weaker_results(every_engine_client: TestClient) -> None:
    everything = search(every_engine_client, query="red cube", k=10)["results"]
    floor = everything[0]["score"] - 1e-3  # only red-cube (red and cube) scores this much
    body = search(every_engine_client, query="red cube", k=10, min_score=floor)
    assert [r["id"] for r in body["results"]] == ["red-cube"] and body["left_out"] == len(everything) - 1
    none = search(every_engine_client, query="red cube", min_score=1000.0)
    assert none["results"] == [] and none["no_match"]["reason"] == "No result scores 1000 or more."


@pytest.mark.parametrize("raw", ["-1.0", "-Infinity", "1e999", "NaN"])  # as a client may send them
def test_min_score_negative_or_not_finite_is_422_naming_it(embedded_client: TestClient, raw: str) -> None:
    r = embedded_client.post(
        "/search",
        content=f'{{"query": "red", "min_score": {raw}}}',
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 422, r.text
    assert [e["loc"] for e in r.json()["detail"]] == [["body", "min_score"]]


def test_weights_below_the_floor_make_no_match(
    every_engine_spec: str, make_settings: Callable[..., ServiceSettings]
) -> None:
    """ "large" has weight 1.0 in its 6 images: under a floor of 2 they hold it too weakly."""
    settings = make_settings(every_engine_spec, match_min_weight=2.0)
    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        body = search(c, query="large")
        strong = search(c, query="large cube")  # cube's weights (4-4.5) clear the floor
    assert body["results"] == []
    assert body["no_match"]["reason"] == (
        "The images that hold large hold it too weakly to count as a match "
        f"(a weight of 2 or more among the {body['left_out']} best-scored images)."
    )
    assert {r["id"] for r in strong["results"]} == {f"{c}-cube" for c in ("red", "blue", "green", "yellow")}


def test_search_cli_says_what_found_nothing(corpus: Corpus, embedded_spec: str) -> None:
    base = [sys.executable, "-m", "vsparta.cli", "search", "--backend", embedded_spec]
    base += ["--model", str(corpus.model_dir)]
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*base, *args], capture_output=True, text=True, cwd=REPO, env=env, timeout=120)

    zebra = run("zebra")
    assert zebra.returncode == 0, zebra.stderr
    assert zebra.stdout.splitlines()[1:] == [
        "images holding each word (of 19): zebra 0",
        "no match: No image has zebra.",
    ]
    common = run("object", "--all-results", "--json")
    assert common.returncode == 0 and len(json.loads(common.stdout)["results"]) == 10
    bad = run("red", "--min-score", "nan")
    assert bad.returncode == 2 and "--min-score must be a finite number >= 0" in bad.stderr
