"""Named choices live in registries (``core.registry``): one module and one line per choice, names
listed without importing any choice, an unknown name refused in one sentence that lists the names."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from vsparta.core.registry import Registry, UnknownChoice
from vsparta.model.stems.registry import STEMS
from vsparta.service.rerankers.registry import RERANKERS
from vsparta.termindex.weightings.registry import WEIGHTINGS

REPO = Path(__file__).resolve().parents[1]


def test_a_registry_imports_a_choice_only_when_it_is_used(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "choice_one.py").write_text("CHOICE = 'one'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry: Registry[str] = Registry("colour", {"one": "choice_one", "two": "choice_missing"}, "CHOICE")
    assert registry.names() == ("one", "two") and "one" in registry and "three" not in registry
    assert "choice_one" not in sys.modules
    assert registry.get("one") == "one"
    with pytest.raises(UnknownChoice, match="unknown colour 'three': one of one, two"):
        registry.get("three")
    with pytest.raises(ValueError, match="already registered"):
        registry.register("one", "elsewhere")
    registry.register("three", "choice_one")
    assert registry.get("three") == "one"


def test_stem_names_are_read_without_torch() -> None:
    code = (
        "import sys; from vsparta.model.stems.registry import STEMS; "
        "print(','.join(STEMS.names()), 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.split() == [",".join(STEMS.names()), "False"]


@pytest.mark.parametrize("name", STEMS.names())
def test_every_registered_stem_is_a_vision_stem(name: str) -> None:
    from vsparta.model.stems.base import VisionStem

    assert issubclass(STEMS.get(name), VisionStem)


def test_only_the_stem_registry_names_stem_modules() -> None:
    """No if/elif on stem names outside the stems' own modules: the registry is the one dispatch."""
    offenders = []
    for path in sorted((REPO / "model").rglob("*.py")):
        if path.parent.name == "stems":
            continue
        text = path.read_text(encoding="utf-8")
        offenders += [f"{path.name}: {needle}" for needle in STEMS.names() if f'stem == "{needle}"' in text]
    assert offenders == []


@pytest.mark.parametrize("name", WEIGHTINGS.names())
def test_every_registered_query_weighting_keeps_weights_in_bounds(name: str) -> None:
    """Each weighting is a ``QueryWeighting`` of its registered name, and its weights are finite
    and in (0, MAX_QUERY_WEIGHT] for counts up to the largest a query may hold."""
    import numpy as np

    from vsparta.termindex.base import MAX_QUERY_WEIGHT
    from vsparta.termindex.weightings.base import QueryWeighting

    rule = WEIGHTINGS.get(name)
    assert isinstance(rule, QueryWeighting) and rule.name == name and rule.description
    counts = np.array([1.0, 2.0, 3.0, 64.0])
    df = np.array([0, 5, 10, 10]) if rule.statistics else None
    weights = np.asarray(rule.weigh(counts, df, 10 if rule.statistics else 0), dtype=np.float64)
    assert weights.shape == counts.shape and np.all(np.isfinite(weights))
    assert np.all(weights > 0) and np.all(weights <= MAX_QUERY_WEIGHT)


@pytest.mark.parametrize("name", RERANKERS.names())
def test_every_registered_reranker_is_named_and_bounded(name: str) -> None:
    import asyncio

    from vsparta.service.search import WeightedQuery
    from vsparta.termindex import Hit

    reranker = RERANKERS.get(name)
    assert reranker.name == name and reranker.description and reranker.candidates(5) >= 5
    hits = [
        Hit(f"d{i}", 10.0 - i, {}, {1: (1.0, 0.5)} if i % 2 else {1: (1.0, 0.5), 2: (2.0, 1.0)})
        for i in range(9)
    ]
    query = WeightedQuery({1: 1.0, 2: 1.0}, ["a", "b"], [], ["a", "b"])
    out = asyncio.run(reranker.rerank(query, hits, 3))
    assert len(out) == 3 and {h.id for h in out} <= {h.id for h in hits}


def test_only_the_registries_name_weightings_and_rerankers() -> None:
    """No comparison with a weighting's or reranker's name outside its own module: adding one is a
    module and a registration line (the page, the settings, the CLI and the OpenAPI enum follow)."""
    names = [*WEIGHTINGS.names(), *RERANKERS.names()]
    homes = {REPO / "termindex" / "weightings", REPO / "service" / "rerankers"}
    offenders = []
    for folder in ("core", "termindex", "model", "service", "indexer", "vsparta", "bench", "scenes"):
        for path in sorted((REPO / folder).rglob("*")):
            if path.suffix not in {".py", ".js", ".html"} or path.parent in homes:
                continue
            text = path.read_text(encoding="utf-8")
            offenders += [
                f"{path.relative_to(REPO)}: {n}"
                for n in names
                for op in ("== ", "=== ")
                if f'{op}"{n}"' in text
            ]
    assert offenders == []
