"""What a response shows: whole words, ids and URLs (never server paths), only the fields asked for."""

from __future__ import annotations

import json
import math

import pytest
from fastapi.testclient import TestClient
from service_testdata import Corpus, expected_ranking

from vsparta.service.matching import Word, words_of
from vsparta.service.results import ResultView, group_by_word
from vsparta.termindex import MAX_QUERY_WEIGHT


def test_words_merge_pieces_and_drop_punctuation(corpus: Corpus) -> None:
    tok = corpus.tokenizer
    tokens = [tok.id_to_token(i) for i in tok.tokenize("Two red cubes, a blue hexagons.")]
    assert "##s" in tokens and "," in tokens  # the tokenizer really splits these
    words = words_of(tokens)
    assert [w.text for w in words] == ["two", "red", "cubes", "a", "blue", "hexagons"]
    assert words[2] == Word("cubes", ("cube", "##s"))
    assert words_of(["##s", ".", "[UNK]", "red"]) == [Word("red", ("red",))]  # orphan, punctuation, special


def test_group_by_word_sums_pieces_and_keeps_only_readable_words() -> None:
    words = words_of(["red", "cube", "##s"])
    grouped = group_by_word([("cube", 1.0), ("##s", 0.25), ("red", 2.0), ("##bus", 5.0), (".", 9.0)], words)
    assert grouped == [
        {"word": "red", "value": 2.0, "tokens": ["red"]},
        {"word": "cubes", "value": 1.25, "tokens": ["cube", "##s"]},
    ]
    # a whole-word token outside the text stands for itself
    assert group_by_word([("sphere", 1.0)], words) == [{"word": "sphere", "value": 1.0, "tokens": ["sphere"]}]


def test_search_shows_whole_query_words(client: TestClient) -> None:
    r = client.post("/search", json={"query": "red cubes.", "k": 1, "explain": True})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["query_tokens"] == ["red", "cube", "##s", "."]
    assert body["query_words"] == ["red", "cubes"]
    top = body["results"][0]
    assert top["id"] == "red-cube"
    by_token = {t["token"]: t["contribution"] for t in top["terms"]}
    words = {w["word"]: w for w in top["words"]}
    assert set(words) == {"red", "cubes"}
    assert words["cubes"]["tokens"] == ["cube"]
    assert math.isclose(words["cubes"]["contribution"], by_token["cube"])


def test_similar_names_the_image_and_its_words(client: TestClient) -> None:
    r = client.get("/images/red-cube/similar", params={"k": 3, "explain": True})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["similar_to"] == {
        "id": "red-cube",
        "metadata": {"caption": "a large red cube"},
        "image_url": "/images/red-cube/file",
        "thumbnail_url": "/images/red-cube/thumbnail",
    }
    assert body["query_tokens"] == ["cube", "red", "large", "object"]  # heaviest first
    assert body["query_words"] == ["cube", "red", "large", "object"]
    assert all(r["words"] for r in body["results"])


def _all_responses(c: TestClient, corpus: Corpus) -> list[str]:
    texts = [c.post("/search", json={"terms": {"purple": 1.0, "red": 1.0}, "k": 100}).text]
    for doc in corpus.docs:
        texts.append(c.get(f"/images/{doc.id}").text)
        texts.append(c.get(f"/images/{doc.id}/similar", params={"k": 3}).text)
    return texts


def test_responses_never_show_server_paths(client: TestClient, corpus: Corpus) -> None:
    for text in _all_responses(client, corpus):
        assert str(corpus.root) not in text and "/tmp" not in text, text
        body = json.loads(text)
        for item in [body, *body.get("results", []), body.get("similar_to") or {}]:
            assert not {"image", "image_root"} & set(item.get("metadata") or {}), text


@pytest.mark.parametrize(
    ("doc_id", "has_file"),
    [
        ("red-cube", True),
        ("broken-file", True),  # the file is there (only its thumbnail fails)
        ("missing-file", False),
        ("escape-relative", False),
        ("escape-absolute", False),
        ("escape-symlink", False),
        ("not-an-image", False),
        ("no-image", False),
    ],
)
def test_image_urls_only_for_files_that_exist(client: TestClient, doc_id: str, has_file: bool) -> None:
    detail = client.get(f"/images/{doc_id}").json()
    assert (detail["image_url"] is not None) == has_file
    assert (detail["thumbnail_url"] is not None) == has_file
    if has_file:
        assert client.get(detail["image_url"]).status_code == 200
    hits = client.post("/search", json={"terms": {"purple": 1.0, "red": 1.0}, "k": 100}).json()["results"]
    hit = next(h for h in hits if h["id"] == doc_id)
    assert (hit["image_url"] is not None) == has_file


def test_fields_choose_what_results_carry(client: TestClient) -> None:
    full = client.post("/search", json={"query": "red", "k": 5})
    captions = client.post("/search", json={"query": "red", "k": 5, "fields": ["metadata.caption"]})
    bare = client.post("/search", json={"query": "red", "k": 5, "fields": []})
    assert full.status_code == captions.status_code == bare.status_code == 200
    assert [r["id"] for r in captions.json()["results"]] == [r["id"] for r in full.json()["results"]]
    for r in captions.json()["results"]:
        assert set(r) == {"id", "score", "metadata"} and set(r["metadata"]) == {"caption"}
    for r in bare.json()["results"]:
        assert set(r) == {"id", "score"}
    assert len(bare.content) < len(captions.content) < len(full.content)
    urls = client.post("/search", json={"query": "red", "k": 1, "fields": ["thumbnail_url"]}).json()
    assert urls["results"][0] == {
        "id": "red-cube",
        "score": urls["results"][0]["score"],
        "thumbnail_url": urls["results"][0]["thumbnail_url"],
    }
    similar = client.get(
        "/images/red-cube/similar", params={"k": 2, "fields": ["metadata.caption", "image_url"]}
    ).json()
    assert all(set(r) == {"id", "score", "metadata", "image_url"} for r in similar["results"])
    assert set(similar["similar_to"]) == {"id", "metadata", "image_url"}


def test_weights_up_to_the_bound_rank_like_the_reference(client: TestClient, corpus: Corpus) -> None:
    tok = corpus.tokenizer
    terms = {"red": MAX_QUERY_WEIGHT, "cube": MAX_QUERY_WEIGHT / 3, "purple": 1e-30}
    r = client.post("/search", json={"terms": terms, "k": 8})
    assert r.status_code == 200, r.text
    want = expected_ranking(corpus, {tok.token_to_id(t): w for t, w in terms.items()}, 8)
    got = r.json()["results"]
    assert [h["id"] for h in got] == [i for i, _ in want]
    for h, (_, s) in zip(got, want, strict=True):
        assert math.isclose(h["score"], s, rel_tol=1e-2)
    over = client.post("/search", json={"terms": {"circle": 3.5e38}, "k": 3})
    assert over.status_code == 422
    assert over.json()["detail"][0]["loc"] == ["body", "terms", "circle"]


def test_what_the_indexer_keeps_about_its_files_is_never_shown() -> None:
    meta = {"image": "a.jpg", "image_root": "/photos", "file_version": "2048:17645472", "kind": "x"}
    assert ResultView().metadata(meta) == {"kind": "x"}
    assert ResultView.of(False, ["metadata.file_version", "metadata.kind"]).metadata(meta) == {"kind": "x"}
