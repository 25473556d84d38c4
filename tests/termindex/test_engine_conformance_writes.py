"""The engine conformance suite, writes: upsert, replace, delete and count; array writes; bad input
refused with a ``termindex.errors`` type and nothing lost; an index that survives being opened
again. Run on every engine the registry knows (``conformance.TARGETS``); the reads are in
``test_engine_conformance.py``."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conformance import TARGETS, Running, running_target

from vsparta.termindex import TermIndex, open_index
from vsparta.termindex.base import MAX_ID_LENGTH, MAX_QUERY_WEIGHT, TermDocument
from vsparta.termindex.errors import (
    DocumentNotFound,
    IndexNotFound,
    InvalidDocument,
    InvalidInput,
    InvalidQuery,
)

ODD_IDS = [
    "a/b/../c\\d",
    "with spaces  and more ",
    "quotes\"'`",
    "?&=#%20+",
    "hash#frag",
    "<script>alert(1)</script>",
    "ünïcødé-画像-🖼️",
    "%2F-percent",
    ".",
    "..",
    "+plus:colon,comma*star",
    "x" * MAX_ID_LENGTH,
]
BAD_IDS = ["", "line\nbreak", "nul\x00", "bell\x07", "del\x7f", "x" * (MAX_ID_LENGTH + 1), 42, None]
BAD_WEIGHTS = [math.nan, -1.0, -0.5, 0.0, math.inf, -math.inf]
BAD_QUERIES = [
    ({}, "empty"),
    ({1: math.nan}, "finite"),
    ({1: math.inf}, "finite"),
    ({1: -math.inf}, "finite"),
    ({1: -1.0}, "> 0"),
    ({1: 0.0}, "> 0"),
    ({1: "heavy"}, "not a number"),
    ({1: None}, "not a number"),
    ({"cat": 1.0}, "vocabulary id"),
    ({"1": 1.0}, "vocabulary id"),
    ({-3: 1.0}, "vocabulary id"),
    ({1.5: 1.0}, "vocabulary id"),
    ({True: 1.0}, "vocabulary id"),
    ({None: 1.0}, "vocabulary id"),
    *(({2: w}, f"<= {MAX_QUERY_WEIGHT:g}") for w in (MAX_QUERY_WEIGHT * (1 + 2**-40), 3e38, 3.5e38, 1e308)),
]
BAD_K = [0, -1, True, 2.5, "10", 10_001]


@pytest.fixture(params=list(TARGETS))
def running(request: pytest.FixtureRequest) -> Running:
    return running_target(request.param, request)


@pytest.fixture
def small(running: Running):
    """Two documents ("a" matches terms 1 and 2, "b" term 2 only); the index and its spec."""
    with running.fresh("small") as (index, spec):
        assert index.upsert([TermDocument("a", {1: 1.0, 2: 2.0}, {"n": 1}), TermDocument("b", {2: 0.5})]) == 2
        yield index, spec


def _state(index: TermIndex) -> list[tuple[str, float]]:
    return [(h.id, h.score) for h in index.search({1: 1.0, 2: 1.0, 3: 1.0}, k=100)]


def test_an_empty_index_answers_with_nothing(running: Running) -> None:
    with running.fresh("empty") as (index, _):
        assert index.count() == 0 and index.search({1: 1.0}) == []
        assert index.upsert([]) == 0 and index.delete([]) == 0 and index.existing_ids(["a"]) == set()
        assert list(index.iter_ids()) == []
        with pytest.raises(DocumentNotFound):
            index.get("a")


def test_upsert_replaces_by_id_and_delete_counts_what_existed(running: Running, small) -> None:
    index, _ = small
    meta = {"nested": {"deep": [1, {"x": "y"}]}, "k-1": None, "image": "x.jpg", "caption": "ünï"}
    assert index.upsert([TermDocument("a", {7: 3.0}, meta)]) == 1
    got = index.get("a")
    assert (dict(got.weights), dict(got.metadata)) == ({7: 3.0}, meta) and index.count() == 2
    assert [h.id for h in index.search({1: 1.0})] == []  # the old version is gone
    assert [h.id for h in index.search({7: 1.0, 2: 1.0})] == ["a", "b"]
    index.upsert([TermDocument("c", {1: 1.0}), TermDocument("d", {1: 2.0}), TermDocument("c", {2: 9.0})])
    assert index.count() == 4 and dict(index.get("c").weights) == {2: 9.0}  # a repeated id: the last wins
    assert index.delete(["b", "c", "b", "missing"]) == 2
    assert index.delete(["b"]) == 0 and index.count() == 2
    assert sorted(index.iter_ids()) == ["a", "d"]  # replaced ids once, deleted ones not at all
    with pytest.raises(DocumentNotFound):
        index.get("b")
    assert "b" not in {h.id for h in index.search({2: 1.0}, k=100)}
    index.upsert([TermDocument("b", {1: 100.0})])  # a deleted id can come back
    assert index.search({1: 1.0}, k=1)[0].id == "b" and index.count() == 3


def test_odd_ids_round_trip(running: Running) -> None:
    with running.fresh("ids") as (index, spec):
        docs = [TermDocument(i, {7: 1.0 + n}, {"name": i}) for n, i in enumerate(ODD_IDS)]
        assert index.upsert(docs) == len(ODD_IDS)
        for i in ODD_IDS:
            got = index.get(i)
            assert (got.id, dict(got.metadata)) == (i, {"name": i})
        assert [h.id for h in index.search({7: 1.0}, k=100)] == list(reversed(ODD_IDS))  # heavier first
        assert index.existing_ids(ODD_IDS) == set(ODD_IDS)
        assert sorted(index.iter_ids()) == sorted(ODD_IDS)
        with open_index(spec) as reopened:
            assert {h.id for h in reopened.search({7: 1.0}, k=100)} == set(ODD_IDS)
            assert reopened.delete(ODD_IDS[:3]) == 3 and reopened.count() == len(ODD_IDS) - 3


def test_array_writes_store_what_upsert_stores(running: Running) -> None:
    from elastic_testkit import random_docs

    docs = random_docs(300, 300, seed=11)
    indptr = np.cumsum([0] + [len(d.weights) for d in docs])
    terms = np.array([t for d in docs for t in d.weights], dtype=np.int32)
    weights = np.array([w for d in docs for w in d.weights.values()], dtype=np.float32)
    with running.fresh("rows") as (rows, _), running.fresh("docs") as (plain, _):
        as_f32 = [TermDocument(d.id, {t: float(np.float32(w)) for t, w in d.weights.items()}, d.metadata)
                  for d in docs]  # fmt: skip
        assert plain.upsert(as_f32) == 300
        assert (
            rows.upsert_arrays([d.id for d in docs], indptr, terms, weights, [d.metadata for d in docs])
            == 300
        )
        for q in [{1: 1.0}, {5: 2.0, 17: 1.0, 250: 0.5}, {0: 1.0, 3: 1.0}]:
            assert [(h.id, h.score, h.metadata) for h in rows.search(q, k=20)] == [
                (h.id, h.score, h.metadata) for h in plain.search(q, k=20)
            ]
        assert rows.get(docs[9].id) == plain.get(docs[9].id)
        with pytest.raises(InvalidDocument, match="twice"):
            rows.upsert_arrays(["z"], np.array([0, 2]), np.array([4, 4]), np.ones(2))
        with pytest.raises(InvalidDocument, match="indptr"):
            rows.upsert_arrays(["z"], np.array([0, 3]), np.array([4, 5]), np.ones(2))
        with pytest.raises(InvalidDocument, match="weight"):
            rows.upsert_arrays(["z"], np.array([0, 1]), np.array([4]), np.array([np.nan]))
        with pytest.raises(InvalidDocument, match="JSON"):
            rows.upsert_arrays(["z"], np.array([0, 1]), np.array([4]), np.ones(1), [{"blob": object()}])
        assert rows.count() == 300 and rows.existing_ids(["z"]) == set()


@pytest.mark.parametrize("bad", BAD_IDS, ids=repr)
def test_bad_ids_are_refused(small, bad: object) -> None:
    index, _ = small
    before = _state(index)
    for call in (lambda: index.upsert([TermDocument(bad, {1: 1.0})]), lambda: index.delete([bad]),
                 lambda: index.get(bad)):  # fmt: skip
        with pytest.raises(InvalidDocument, match="document id"):
            call()
    assert index.count() == 2 and _state(index) == before


@pytest.mark.parametrize("weight", BAD_WEIGHTS)
def test_a_batch_with_a_bad_document_writes_nothing(small, weight: float) -> None:
    index, _ = small
    before = _state(index)
    with pytest.raises(InvalidDocument, match="weight"):
        index.upsert([TermDocument("ok", {3: 1.0}), TermDocument("bad", {3: weight})])
    with pytest.raises(InvalidDocument, match="vocabulary id"):
        index.upsert([TermDocument("ok", {3: 1.0}), TermDocument("bad", {-3: 1.0})])
    with pytest.raises(InvalidDocument, match="JSON"):
        index.upsert([TermDocument("ok", {3: 1.0}), TermDocument("bad", {3: 1.0}, {"blob": object()})])
    assert index.count() == 2 and _state(index) == before and index.existing_ids(["ok", "bad"]) == set()


@pytest.mark.parametrize(("query", "says"), BAD_QUERIES, ids=repr)
def test_bad_queries_are_refused(small, query: dict, says: str) -> None:
    index, _ = small
    with pytest.raises(InvalidQuery, match=says.replace("+", r"\+")):
        index.search(query)


def test_bad_k_and_n_terms_are_refused_unknown_terms_match_nothing(small) -> None:
    index, _ = small
    for k in BAD_K:
        with pytest.raises(InvalidQuery, match="k must be"):
            index.search({1: 1.0}, k=k)  # type: ignore[arg-type]
    for n in (0, -1, 2.5, True):
        with pytest.raises(InvalidQuery, match="n_terms"):
            index.similar("a", n_terms=n)  # type: ignore[arg-type]
    with pytest.raises(DocumentNotFound):
        index.similar("missing")
    assert [h.id for h in index.search({2: MAX_QUERY_WEIGHT})] == ["a", "b"]  # the bound itself is fine
    assert index.search({999_999: 1.0}) == []  # a term in no document
    assert [h.id for h in index.search({999_999: 1.0, 2: 1.0})] == ["a", "b"]
    assert issubclass(InvalidQuery, InvalidInput) and issubclass(InvalidDocument, InvalidInput)
    assert issubclass(InvalidInput, ValueError) and not issubclass(InvalidDocument, InvalidQuery)


def test_a_document_without_terms_is_refused_or_never_matches(small) -> None:
    """The one latitude: an engine may store a document with no terms (it matches nothing) or refuse it."""
    index, _ = small
    try:
        index.upsert([TermDocument("empty", {}, {"note": "no terms"})])
    except InvalidDocument as exc:
        assert "empty" in str(exc) and index.count() == 2
        return
    assert index.count() == 3 and dict(index.get("empty").weights) == {}
    assert "empty" not in {h.id for h in index.search({1: 1.0, 2: 1.0}, k=100)}


def test_an_index_survives_being_opened_again(running: Running, small) -> None:
    index, spec = small
    index.upsert([TermDocument(f"r{i}", {1: 0.5 + i, 4: 1.0}, {"i": i}) for i in range(20)])
    before = [(h.id, h.score, h.contributions) for h in index.search({1: 1.0, 4: 2.0}, k=30, explain=True)]
    index.close()
    with open_index(spec) as again:
        assert again.count() == 22 and dict(again.get("r3").metadata) == {"i": 3}
        assert [
            (h.id, h.score, h.contributions) for h in again.search({1: 1.0, 4: 2.0}, k=30, explain=True)
        ] == before
        assert again.upsert([TermDocument("late", {4: 50.0})]) == 1  # writable after reopening
        assert again.search({4: 1.0}, k=1)[0].id == "late"
    with open_index(spec) as third:
        assert third.count() == 23
    with pytest.raises(IndexNotFound):
        open_index(running.spec(running.name("never-made")))
