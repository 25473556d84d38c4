"""Weights sent to Elasticsearch as the shortest text of the value it keeps (no server needed)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from vsparta.termindex.base import TermDocument
from vsparta.termindex.elastic.bulk import array_actions, doc_actions
from vsparta.termindex.elastic.text import N_CODES, shortest_text, stored_codes, terms_texts
from vsparta.termindex.errors import InvalidDocument
from vsparta.termindex.oracle import round_like_elasticsearch


def _java_code(text: bytes) -> int:
    """The code of the float32 nearest to the decimal (correctly rounded, as Float.parseFloat)."""
    from fractions import Fraction

    value = Fraction(text.decode())
    f = np.float32(float(value))  # candidate; check its neighbours against the exact decimal
    best = min(
        (np.nextafter(f, np.float32(0)), f, np.nextafter(f, np.float32(np.inf))),
        key=lambda c: (abs(Fraction(float(c)) - value), int(np.float32(c).view(np.uint32)) & 1),
    )
    return int(np.float32(best).view(np.uint32)) >> 15


def test_every_normal_code_round_trips_through_its_text() -> None:
    exponents = np.arange(N_CODES) >> 8
    codes = np.flatnonzero((exponents > 0) & (exponents < 255))
    for code in codes[::97].tolist() + [int(codes[0]), int(codes[-1])]:
        text = shortest_text(code)
        json.loads(text)  # a JSON number
        assert _java_code(text) == code, (code, text)


def test_texts_are_short_for_model_sized_weights() -> None:
    w = np.random.default_rng(0).lognormal(-1.0, 1.0, 5000).astype(np.float32)
    lengths = [len(shortest_text(int(c))) for c in stored_codes(w)]
    repr_lengths = [len(str(x)) for x in w]  # float32 shortest round trip, as sent before: ~10
    assert np.mean(lengths) <= 5.5 < 9 <= np.mean(repr_lengths) and max(lengths) <= 7


def test_terms_texts_match_a_plain_join_and_keep_the_stored_value() -> None:
    rng = np.random.default_rng(1)
    indptr = np.array([0, 3, 3 + 5, 3 + 5 + 1])
    ids = np.concatenate([np.sort(rng.choice(40000, n, replace=False)) for n in np.diff(indptr)])
    w = rng.lognormal(0.0, 2.0, len(ids)).astype(np.float32)
    texts = terms_texts(indptr, ids, w)
    for i, text in enumerate(texts):
        a, b = indptr[i], indptr[i + 1]
        pairs = zip(ids[a:b].tolist(), stored_codes(w[a:b]).tolist(), strict=True)
        expected = b",".join(b'"%d":%s' % (t, shortest_text(c)) for t, c in pairs)
        assert text == expected
        parsed = json.loads(b"{" + text + b"}")
        kept = round_like_elasticsearch(np.array(list(parsed.values())))
        assert kept.tolist() == round_like_elasticsearch(w[a:b]).tolist()


def test_both_write_paths_store_the_same_source() -> None:
    doc = TermDocument(id="img-1", weights={7: 0.36787945, 3: 1.0, 12: 2.5e-6}, metadata={"caption": "é"})
    ((_, from_doc),) = doc_actions([doc], "idx")
    ((_, from_arrays),) = array_actions(
        "idx",
        ["img-1"],
        [0, 3],
        np.array([7, 3, 12]),
        np.array([0.36787945, 1.0, 2.5e-6]),
        [{"caption": "é"}],
    )
    assert from_doc == from_arrays
    source = json.loads(from_doc.split(b"\n")[1])
    assert source["terms"] == {"7": 0.368, "3": 1, "12": 2.5e-06}


def test_a_repeated_term_is_refused_in_rising_and_unsorted_rows() -> None:
    ok = list(array_actions("i", ["a", "b"], [0, 2, 4], np.array([1, 5, 9, 2]), np.ones(4)))
    assert [doc_id for doc_id, _ in ok] == ["a", "b"]
    with pytest.raises(InvalidDocument, match="'b' lists a term id twice"):
        list(array_actions("i", ["a", "b"], [0, 2, 5], np.array([1, 5, 9, 2, 9]), np.ones(5)))
    with pytest.raises(InvalidDocument, match="'a' lists a term id twice"):
        list(array_actions("i", ["a"], [0, 3], np.array([4, 4, 1]), np.ones(3)))
