"""What the engine conformance suite (``test_engine_conformance.py``) runs on, and how it compares.

``TARGETS`` lists one running engine per line the project supports, for every engine in the
registry (``termindex.registry.PLUGINS``); ``test_every_registered_engine_is_a_target`` fails until
a new engine is added here with three facts about it:

- where a fresh index goes (a folder, a server's URL) and how it is removed after the test;
- what it keeps of a weight (``rounding``: the oracle is built on the rounded weights, so an
  engine is compared at its own precision, never with a loosened tolerance);
- whether it sums scores in float32 (Lucene: ``float32`` True, and only documents whose exact
  scores lie within the float32 error bound may come back in another order) or exactly (the
  embedded engine rescoring in float64: identical ids and scores, ``==``).
"""

from __future__ import annotations

import contextlib
import shutil
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from elastic_testkit import ENGINE_LINES, check_es_top_k, float32_tol

from vsparta.termindex import TermIndex, open_index
from vsparta.termindex.base import Hit, heaviest_terms
from vsparta.termindex.oracle import BruteForceOracle, round_like_elasticsearch, round_like_embedded

RoundFn = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class Target:
    """One engine line the suite runs on."""

    engine: str  # its name in the registry
    rounding: RoundFn  # what it keeps of a weight
    float32: bool  # Lucene's float32 sums: near-ties within the bound may be ordered either way


TARGETS: dict[str, Target] = {
    "embedded": Target("embedded", round_like_embedded, float32=False),
    **{
        label: Target(engine, round_like_elasticsearch, float32=True)
        for label, (engine, _line) in ENGINE_LINES.items()
    },
}


@dataclass(frozen=True)
class Running:
    """A target with a place to make indices in: ``spec(name)`` names one, ``fresh()`` makes one."""

    label: str
    target: Target
    spec: Callable[[str], str]

    @property
    def rounding(self) -> RoundFn:
        return self.target.rounding

    def stored(self, weights: Mapping[int, float]) -> dict[int, float]:
        """A document's weights as this engine keeps them."""
        return {t: float(self.rounding(np.float64(w))) for t, w in weights.items()}

    def name(self, area: str) -> str:
        return f"conform-{area}-{uuid.uuid4().hex[:10]}"

    @contextlib.contextmanager
    def fresh(self, area: str, **options: object) -> Iterator[tuple[TermIndex, str]]:
        """A new, empty index and its spec; removed afterwards whatever happens."""
        spec = self.spec(self.name(area))
        index = open_index(spec, create=True, **options)
        try:
            yield index, spec
        finally:
            remove(self, index, spec)

    def oracle(self, docs: list) -> BruteForceOracle:
        return BruteForceOracle(docs, round_weights=self.rounding)

    def score_tol(self, score: float) -> float:
        """How far a returned score may be from the oracle's exact one."""
        return float32_tol(score) if self.target.float32 else 1e-12 * abs(score)


def remove(running: Running, index: TermIndex, spec: str) -> None:
    """Delete a test index (the test may have closed its handle): the folder, or the server's
    versions behind the alias."""
    index.close()
    if running.target.engine == "embedded":
        shutil.rmtree(Path(spec.removeprefix("embedded:")), ignore_errors=True)
        return
    with open_index(spec) as handle:
        handle.drop()  # type: ignore[attr-defined]


def running_target(label: str, request: pytest.FixtureRequest) -> Running:
    """The target ``label`` on this machine: a temporary folder, or the test node of its line."""
    target = TARGETS[label]
    if target.engine == "embedded":
        root = request.getfixturevalue("tmp_path_factory").mktemp("conformance")
        return Running(label, target, lambda name: f"embedded:{root / name}")
    engine, line = ENGINE_LINES[label]
    if engine == "elasticsearch":
        url = request.getfixturevalue("es_url")
        return Running(label, target, lambda name: f"{url}/{name}")
    url = request.getfixturevalue("opensearch_url_of")(line)
    return Running(label, target, lambda name: f"{engine}+{url}/{name}")


def check_top_k(
    running: Running, hits: list[Hit], oracle: BruteForceOracle, query: dict[int, float], k: int
) -> tuple[bool, bool]:
    """The engine's top k against the oracle at its rounding: (identical to the oracle's list,
    the list holds an exact score tie). Exact engines must give the oracle's ids and scores."""
    if running.target.float32:
        return check_es_top_k(hits, oracle, query, k)
    want = [(h.id, h.score) for h in oracle.search(query, k=k)]
    assert [(h.id, h.score) for h in hits] == want, query
    scores = [s for _, s in want]
    return True, any(a == b for a, b in zip(scores, scores[1:], strict=False))


def similar_expected(running: Running, oracle: BruteForceOracle, doc_weights: Mapping[int, float],
                     doc_id: str, k: int, n_terms: int) -> list[Hit]:  # fmt: skip
    """What ``similar`` must return: the oracle's top k + 1 for the document's ``n_terms``
    heaviest terms as the engine keeps them (ties by id), without the document itself."""
    query = dict(heaviest_terms(running.stored(doc_weights), n_terms))
    return [h for h in oracle.search(query, k=k + 1) if h.id != doc_id][:k]
