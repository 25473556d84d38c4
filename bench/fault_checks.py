"""What a broken cluster must still get right, checked against a brute-force oracle:

- every answer of a query stream is 503 or exactly the oracle's top-k over a state the index held
  between loads (refresh is off while a load runs, so a search sees the index as the load found
  it; the states are: before the first load, after each load), never a mix of states, never 500;
- every document a load reported indexed is in the index, once, with the oracle's weights (at
  Elasticsearch's 9-bit rounding); at the end the index is exactly the oracle's documents.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vsparta.bench.fault_load import TOKEN_ID, Answer
from vsparta.termindex.base import TermDocument
from vsparta.termindex.elastic.common import parse_doc
from vsparta.termindex.oracle import BruteForceOracle, round_like_elasticsearch

K = 10
# Lucene sums float32 clauses: an engine score is within 4 ulp (relative 4 * 2**-24) of the exact
# one (tests/termindex/elastic_testkit.FLOAT32_REL_TOL has the derivation).
REL_TOL = 4 * 2.0**-24


def _tol(score: float) -> float:
    return REL_TOL * abs(score) + 1e-30


def as_term_document(doc: Mapping[str, Any]) -> TermDocument:
    """A corpus document (``{id, terms: {word: weight}}``) as the engine stores it (vocabulary ids)."""
    return TermDocument(
        doc["id"], {TOKEN_ID[w]: float(x) for w, x in doc["terms"].items()}, doc.get("metadata")
    )


def expected_weights(doc: Mapping[str, Any]) -> dict[int, float]:
    """What the engine keeps of a corpus document's weights (float32, then 9 significant bits)."""
    return {TOKEN_ID[w]: float(round_like_elasticsearch(np.float32(x))) for w, x in doc["terms"].items()}


class OracleState:
    """The oracle over one state of the index; ``matches`` tells whether an answer is its top-k."""

    def __init__(self, name: str, docs: Iterable[Mapping[str, Any]]) -> None:
        self.name = name
        self.oracle = BruteForceOracle(
            (as_term_document(d) for d in docs), round_weights=round_like_elasticsearch
        )
        self.pos = {doc_id: i for i, doc_id in enumerate(self.oracle.ids)}
        self._cache: dict[tuple[tuple[int, float], ...], tuple[np.ndarray, list[tuple[str, float]]]] = {}

    def _truth(self, query: Mapping[int, float]) -> tuple[np.ndarray, list[tuple[str, float]]]:
        key = tuple(sorted(query.items()))
        if key not in self._cache:
            scores, _ = self.oracle.scores(query)
            self._cache[key] = (scores, [(h.id, h.score) for h in self.oracle.search(query, K)])
        return self._cache[key]

    def matches(self, query: Mapping[int, float], hits: list[tuple[str, float]]) -> bool:
        """The oracle's top-k, up to float32 near-ties (two documents whose exact scores are within
        the engine's rounding may come in either order)."""
        scores, want = self._truth(query)
        if len(hits) != len(want) or len({h for h, _ in hits}) != len(hits):
            return False
        for (got_id, got), (_, best) in zip(hits, want, strict=True):
            if got_id not in self.pos:
                return False  # a document this state does not hold
            exact = float(scores[self.pos[got_id]])
            if abs(got - exact) > _tol(exact) or abs(exact - best) > _tol(exact) + _tol(best):
                return False
        return True


@dataclass
class AnswerReport:
    """How a stream's answers came out: statuses, which state each 200 equals, mismatches."""

    statuses: Counter[int] = field(default_factory=Counter)
    states: Counter[str] = field(default_factory=Counter)
    mismatched: list[dict[str, Any]] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.statuses.values())

    def add(self, other: AnswerReport) -> None:
        self.statuses.update(other.statuses)
        self.states.update(other.states)
        self.mismatched.extend(other.mismatched)

    def as_dict(self) -> dict[str, Any]:
        return {
            "answers": self.total,
            "statuses": {str(k): v for k, v in sorted(self.statuses.items())},
            "states": dict(self.states),
            "mismatched": len(self.mismatched),
            "mismatch_examples": self.mismatched[:3],
        }


def check_answers(
    answers: Iterable[Answer], texts: list[str], weights_of: Any, states: list[OracleState]
) -> AnswerReport:
    """Each answer: its status counted; a 200 must equal the top-k of one of ``states``.
    ``weights_of(text)`` is the service's own query weighting (``QueryTokenizer.query_weights``)."""
    report = AnswerReport()
    weights = [weights_of(t) for t in texts]
    for a in answers:
        report.statuses[a.status] += 1
        if a.status != 200:
            continue
        state = next((s for s in states if s.matches(weights[a.query], a.hits)), None)
        if state is None:
            report.mismatched.append({"query": texts[a.query], "hits": a.hits[:3], "sent": round(a.sent, 1)})
        else:
            report.states[state.name] += 1
    return report


def read_documents(index: Any, ids: list[str], chunk: int = 500) -> dict[str, TermDocument]:
    """The stored documents of ``ids`` that exist (realtime ``_mget`` through the engine's client)."""
    found: dict[str, TermDocument] = {}
    for start in range(0, len(ids), chunk):
        part = ids[start : start + chunk]
        resp = index._client.mget(index=index.alias, body={"ids": part}, _source_includes=["terms"])
        for d in resp["docs"]:
            if d.get("found"):
                found[d["_id"]] = parse_doc(d)
    return found


@dataclass
class IndexReport:
    expected: int
    found: int
    missing: list[str]
    wrong_weights: list[str]
    count: int | None = None  # documents the alias holds (after a refresh), when asked

    @property
    def duplicated(self) -> int:
        return max(0, (self.count or 0) - self.found)

    @property
    def ok(self) -> bool:
        exact = self.count is None or self.count == self.expected
        return not self.missing and not self.wrong_weights and exact

    def as_dict(self) -> dict[str, Any]:
        return {
            "expected": self.expected,
            "found": self.found,
            "lost": len(self.missing),
            "lost_examples": self.missing[:5],
            "wrong_weights": len(self.wrong_weights),
            "count": self.count,
            "duplicated": self.duplicated,
        }


def check_documents(index: Any, docs: list[Mapping[str, Any]], count: bool = False) -> IndexReport:
    """Every one of ``docs`` stored with the oracle's weights; ``count``: and the alias holds
    exactly them (ids are ``_id``s, so a document counted twice would show as a larger count)."""
    stored = read_documents(index, [d["id"] for d in docs])
    missing = [d["id"] for d in docs if d["id"] not in stored]
    wrong = [
        d["id"]
        for d in docs
        if d["id"] in stored
        and {t: float(round_like_elasticsearch(w)) for t, w in stored[d["id"]].weights.items()}
        != expected_weights(d)
    ]
    total = None
    if count:
        index.refresh()
        total = index.count()
    return IndexReport(len(docs), len(stored), missing, wrong, total)
