"""The embedded engine's own invalid inputs (tokens outside a fixed vocabulary, a missing index, an
older format) and its answer to a document without terms (stored, never matching). What every
engine refuses is in the conformance suite (``test_engine_conformance_writes.py``)."""

from __future__ import annotations

import pytest

from vsparta.termindex.base import TermDocument
from vsparta.termindex.embedded.index import EmbeddedIndex
from vsparta.termindex.errors import (
    IndexNotFound,
    InvalidDocument,
    InvalidQuery,
    TermIndexError,
)


@pytest.fixture()
def index(tmp_path) -> EmbeddedIndex:
    idx = EmbeddedIndex(tmp_path / "idx", create=True, vocab_size=1000)
    idx.upsert([TermDocument("a", {1: 1.0, 2: 2.0}), TermDocument("b", {2: 0.5})])
    return idx


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


def test_missing_index_names_the_command_that_builds_one(tmp_path):
    with pytest.raises(IndexNotFound, match=r"vsparta index .*--backend embedded:") as err:
        EmbeddedIndex(tmp_path / "nothing")
    assert "create=True" not in str(err.value)


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
