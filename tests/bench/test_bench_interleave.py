"""``vsparta bench engines --interleave``: every engine built, then timed query by query in turn;
each row still carries its own figures and a broken engine is a row that says why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vsparta.bench import exact, measure
from vsparta.bench.engines.base import Adapter
from vsparta.bench.engines.scipy_exact import ScipyAdapter
from vsparta.bench.runner import RunConfig, run_sizes
from vsparta.bench.synthetic import SyntheticSpec, generate_queries, load_or_generate
from vsparta.cli import main

REPO = Path(__file__).resolve().parents[2]


class Recording(ScipyAdapter):
    """Exhaustive scoring that remembers the order of the calls it got."""

    def __init__(self, name: str, log: list[tuple[str, int]]) -> None:
        super().__init__()
        self.name, self.log = name, log

    def search(self, qi: int, k: int) -> list[int]:
        self.log.append((self.name, qi))
        return super().search(qi, k)


class Broken(Adapter):
    name = "broken"

    def build(self, corpus, workdir) -> None:
        raise OSError("disk full")

    def search(self, qi: int, k: int) -> list[int]:
        raise AssertionError("never built, never searched")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return load_or_generate(SyntheticSpec(400, n_terms=120, seed=3), tmp_path_factory.mktemp("cache"))


def test_interleaved_timing_rotates_the_engines_and_keeps_each_ones_results(corpus) -> None:
    queries = generate_queries(12, seed=3)
    calls: list[tuple[str, int]] = []
    engines = [Recording("a", calls), Recording("b", calls), Recording("c", calls)]
    for e in engines:
        e.build(corpus, None)
        e.set_queries(queries)
    timings = measure.time_interleaved(engines, list(range(12)), 10, budget_s=60, warmup=0)
    assert [t.n_queries for t in timings] == [12, 12, 12]
    assert [name for name, qi in calls if qi == 0] == ["a", "b", "c"]
    assert [name for name, qi in calls if qi == 1] == ["b", "c", "a"]  # who goes first rotates
    oracle = exact.StreamingOracle(corpus, queries, 10)
    for t in timings:
        assert all(oracle.agreement(qi, res) == 1.0 for qi, res in enumerate(t.results))
        assert t.p50_ms > 0 and t.p99_ms >= t.p50_ms and t.qps_1 > 0


def test_run_sizes_interleaved_gives_every_engine_a_row(corpus, tmp_path) -> None:
    calls: list[tuple[str, int]] = []
    cfg = RunConfig(n_queries=15, query_budget_s=30, threads=2, workdir=tmp_path, interleave=True)
    rows = run_sizes(
        [("400", lambda: corpus)],
        lambda c: generate_queries(15, seed=4),
        lambda: [Recording("a", calls), Broken(), Recording("b", calls)],
        cfg,
    )
    assert [r["engine"] for r in rows] == ["a", "broken", "b"]
    assert rows[1]["skipped"] == "failed: OSError: disk full"
    for r in (rows[0], rows[2]):
        assert r["n_queries"] == 15 and r["agreement"] == 1.0 and r["qps_all"] > 0 and r["build_s"] >= 0
    # timed in turn: the single-query pass alternates between the two engines
    single = [name for name, _ in calls][10 : 10 + 2 * 15]  # after 5 warm-up queries each
    assert single[:4] in (["a", "b", "b", "a"], ["b", "a", "a", "b"])


def test_model_shaped_corpus_from_the_command_line(tmp_path: Path) -> None:
    out = tmp_path / "out"
    profile = str(REPO / "docs/model-profile-sparse.npz")
    code = main(
        ["bench", "engines", "--corpus", "model-shaped", "--profile", profile,
         "--sizes", "300", "--queries", "20", "--engines", "scipy,embedded", "--interleave",
         "--cache-dir", str(tmp_path / "cache"), "--out-dir", str(out), "--query-budget", "5"]
    )  # fmt: skip
    assert code == 0
    data = json.loads((out / "benchmarks.json").read_text())
    assert data["meta"]["documents"].startswith("model-shaped, seed 0: sampled from")
    rows = {r["engine"]: r for r in data["rows"]}
    assert set(rows) == {"scipy (exhaustive)", "ours: embedded"}
    assert rows["scipy (exhaustive)"]["agreement"] == 1.0
    assert rows["ours: embedded"]["agreement"] >= 0.95  # half-float weights: near-ties only
    assert 15 < rows["scipy (exhaustive)"]["nnz"] / 300 < 45  # the sparse model's ~28 terms per image
