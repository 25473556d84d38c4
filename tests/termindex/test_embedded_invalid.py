"""Invalid inputs give clear InvalidQuery / InvalidDocument errors; odd-but-valid ids round-trip."""

from __future__ import annotations

import math

import pytest

from vsparta.termindex import open_index
from vsparta.termindex.base import MAX_ID_LENGTH, MAX_QUERY_WEIGHT, TermDocument
from vsparta.termindex.embedded.index import MAX_K, EmbeddedIndex
from vsparta.termindex.errors import (
    DocumentNotFound,
    IndexNotFound,
    InvalidDocument,
    InvalidInput,
    InvalidQuery,
    TermIndexError,
)


@pytest.fixture()
def index(tmp_path) -> EmbeddedIndex:
    idx = EmbeddedIndex(tmp_path / "idx", create=True, vocab_size=1000)
    idx.upsert([TermDocument("a", {1: 1.0, 2: 2.0}), TermDocument("b", {2: 0.5})])
    return idx


def test_empty_query(index):
    with pytest.raises(InvalidQuery, match="empty"):
        index.search({})


def test_unknown_token_matches_nothing(index):
    assert index.search({999: 1.0}) == []  # in the vocabulary, in no document
    assert [h.id for h in index.search({999: 1.0, 2: 1.0})] == ["a", "b"]


def test_token_outside_vocabulary(index, tmp_path):
    with pytest.raises(InvalidQuery, match="vocabulary"):
        index.search({1000: 1.0})
    with pytest.raises(InvalidDocument, match="vocab_size"):
        index.upsert([TermDocument("c", {5000: 1.0})])
    untracked = EmbeddedIndex(tmp_path / "untracked", create=True)  # no vocab_size: no match
    untracked.upsert([TermDocument("a", {1: 1.0})])
    assert untracked.search({10**9: 1.0}) == []


@pytest.mark.parametrize("weight", [math.nan, -1.0, 0.0, math.inf, -math.inf, "heavy", None])
def test_bad_query_weights(index, weight):
    with pytest.raises(InvalidQuery, match="weight"):
        index.search({1: 1.0, 2: weight})


@pytest.mark.parametrize("weight", [MAX_QUERY_WEIGHT * (1 + 2**-40), 3e38, 3.5e38, 1e308])
def test_query_weights_above_the_bound_are_refused(index, weight):
    with pytest.raises(InvalidQuery, match=f"<= {MAX_QUERY_WEIGHT:g}"):
        index.search({2: weight})
    assert [h.id for h in index.search({2: MAX_QUERY_WEIGHT})] == ["a", "b"]  # the bound itself is fine


def test_document_and_query_errors_share_a_base():
    assert issubclass(InvalidQuery, InvalidInput) and issubclass(InvalidDocument, InvalidInput)
    assert not issubclass(InvalidDocument, InvalidQuery) and issubclass(InvalidInput, ValueError)


def test_missing_index_names_the_command_that_builds_one(tmp_path):
    with pytest.raises(IndexNotFound, match=r"vsparta index .*--backend embedded:") as err:
        EmbeddedIndex(tmp_path / "nothing")
    assert "create=True" not in str(err.value)


@pytest.mark.parametrize("term", [-1, "1", 1.5, True, None])
def test_bad_query_term_ids(index, term):
    with pytest.raises(InvalidQuery, match="vocabulary id"):
        index.search({term: 1.0})


@pytest.mark.parametrize("weight", [math.nan, -0.5, 0.0, math.inf])
def test_bad_document_weights_write_nothing(index, weight):
    batch = [TermDocument("ok", {3: 1.0}), TermDocument("bad", {3: weight})]
    with pytest.raises(InvalidDocument, match="weight"):
        index.upsert(batch)
    assert index.count() == 2  # the whole batch was rejected before anything was written
    with pytest.raises(DocumentNotFound):
        index.get("ok")


@pytest.mark.parametrize("k", [0, -1, True, 2.5, "10", MAX_K + 1])
def test_bad_k(index, k):
    with pytest.raises(InvalidQuery, match="k must be"):
        index.search({1: 1.0}, k=k)


ODD_IDS = [
    "ünïcødé-画像-🖼️",
    "with spaces  and more ",
    "a/b/../c\\d",
    "quotes\"'`",
    "?&=#%20+",
    "<script>alert(1)</script>",
    "x" * MAX_ID_LENGTH,
]


def test_odd_ids_round_trip(tmp_path):
    index = open_index(f"embedded:{tmp_path / 'idx'}", create=True)
    docs = [TermDocument(i, {7: 1.0 + n}, {"name": i}) for n, i in enumerate(ODD_IDS)]
    assert index.upsert(docs) == len(ODD_IDS)
    for i in ODD_IDS:
        assert index.get(i).id == i
        assert index.get(i).metadata == {"name": i}
    assert [h.id for h in index.search({7: 1.0}, k=100)] == list(reversed(ODD_IDS))
    reopened = EmbeddedIndex(tmp_path / "idx")
    assert {h.id for h in reopened.search({7: 1.0}, k=100)} == set(ODD_IDS)
    assert reopened.delete(ODD_IDS[:3]) == 3
    assert reopened.count() == len(ODD_IDS) - 3


@pytest.mark.parametrize("bad", ["", "line\nbreak", "nul\x00", "bell\x07", "del\x7f", "x" * 513, 42, None])
def test_bad_ids_rejected(index, bad):
    with pytest.raises(InvalidDocument, match="document id"):
        index.upsert([TermDocument(bad, {1: 1.0})])
    with pytest.raises(InvalidDocument, match="document id"):
        index.delete([bad])
    with pytest.raises(InvalidDocument, match="document id"):
        index.get(bad)
    assert index.count() == 2


def test_metadata_must_be_json(index):
    with pytest.raises(InvalidDocument, match="JSON"):
        index.upsert([TermDocument("c", {1: 1.0}, {"blob": object()})])
    assert index.count() == 2


def test_document_without_terms_is_stored_but_never_matches(index):
    index.upsert([TermDocument("empty", {}, {"note": "no positive terms"})])
    assert index.get("empty").weights == {}
    assert "empty" not in {h.id for h in index.search({1: 1.0, 2: 1.0}, k=100)}
    assert index.count() == 3


def test_index_in_an_older_format_says_how_to_rebuild(tmp_path) -> None:
    import json

    from vsparta.termindex.embedded.format import FORMAT_VERSION, MANIFEST

    with EmbeddedIndex(tmp_path / "ix", create=True) as index:
        index.upsert([TermDocument("a", {1: 1.0})])
    manifest = json.loads((tmp_path / "ix" / MANIFEST).read_text())
    (tmp_path / "ix" / MANIFEST).write_text(json.dumps(manifest | {"version": FORMAT_VERSION - 1}))
    with pytest.raises(TermIndexError, match=rf"format v{FORMAT_VERSION - 1}.*rebuild"):
        EmbeddedIndex(tmp_path / "ix")
