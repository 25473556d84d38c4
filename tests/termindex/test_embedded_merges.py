"""The tiered merge policy: bounded write amplification, the simulation matches the engine, and a
bulk load ends in one segment without losing a reported commit when killed."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np

from vsparta.termindex.embedded.index import EmbeddedIndex
from vsparta.termindex.embedded.policy import TieredMergePolicy, plan_final_merge, simulate, tier
from vsparta.termindex.oracle import BruteForceOracle, random_documents, round_like_embedded

ROOT = Path(__file__).resolve().parents[2]
COMMIT = 256


def _arrays(start: int, stop: int, rng: np.random.Generator) -> tuple[list[str], np.ndarray, ...]:
    """Small documents (4 terms) so hundreds of commits stay fast."""
    n = stop - start
    terms = np.sort(rng.choice(500, size=(n, 4), replace=True), axis=1)
    terms[:, 1:] += np.cumsum(terms[:, 1:] == terms[:, :-1], axis=1)  # distinct within a row
    weights = rng.uniform(0.05, 3.0, size=(n, 4))
    indptr = np.arange(0, 4 * n + 1, 4)
    return [f"d{i}" for i in range(start, stop)], indptr, terms.ravel(), weights.ravel()


def test_tier_is_integer_log():
    assert [tier(s, 10) for s in (0, 1, 9, 10, 99, 100, 999, 1000, 10**6 - 1, 10**6)] == [
        0, 0, 0, 1, 1, 2, 2, 3, 5, 6,
    ]  # fmt: skip


def test_simulated_write_amplification_is_logarithmic():
    policy = TieredMergePolicy()
    for n in (51_200, 1_000_000):
        sim = simulate(n, COMMIT, policy)
        assert sim.write_amplification <= 1 + math.log10(n / COMMIT) + 1e-9, (n, sim)
        assert len(sim.final_sizes) <= 9 * (tier(n, 10) + 1)
        assert sum(sim.final_sizes) == n
        bulk = simulate(n, COMMIT, policy, bulk=True)
        assert bulk.final_sizes == [n]
        assert bulk.docs_written == sim.docs_written + n


def test_engine_write_amplification_bounded_and_as_simulated(tmp_path):
    n = 40 * COMMIT  # 10,240 documents
    rng = np.random.default_rng(3)
    index = EmbeddedIndex(tmp_path / "idx", create=True, vocab_size=600)
    for start in range(0, n, COMMIT):
        assert index.upsert_arrays(*_arrays(start, start + COMMIT, rng)) == COMMIT
    stats = index.stats()
    sim = simulate(n, COMMIT, index.merge_policy)
    assert stats["documents"] == n
    assert stats["docs_ingested"] == n
    assert stats["docs_written"] == sim.docs_written  # the simulation is the engine's decision
    assert stats["segments"] == len(sim.final_sizes)
    assert sorted(s.n_docs for s in index._snap.segments) == sorted(sim.final_sizes)
    assert 1.0 < stats["write_amplification"] <= 3 * math.log10(n)
    assert stats["bytes_written"] >= stats["bytes_ingested"] > 0


def test_bulk_load_ends_in_one_segment_and_spares_big_segments(tmp_path):
    docs = random_documents(3000, vocab_size=300, seed=11)
    index = EmbeddedIndex(tmp_path / "idx", create=True, block_size=128)
    with index.bulk_load():
        for start in range(0, 2500, 100):
            index.upsert(docs[start : start + 100])
        assert index.segment_count() > 1
    assert index.segment_count() == 1
    big = index._snap.segments[0].name
    with index.bulk_load():  # a small load into the big index: its own segments merge, not the big one
        for start in range(2500, 3000, 100):
            index.upsert(docs[start : start + 100])
    assert index.segment_count() == 2 and index._snap.segments[0].name == big
    oracle = BruteForceOracle(docs, round_weights=round_like_embedded)
    for q in ({1: 1.0, 2: 2.0}, {7: 1.0}, {40: 3.0, 41: 1.0, 250: 0.5}):
        assert [(h.id, h.score) for h in index.search(q, k=10)] == [
            (h.id, h.score) for h in oracle.search(q, k=10)
        ]


def test_plan_final_merge_needs_two_segments():
    assert plan_final_merge([5000], 5000) == []
    assert plan_final_merge([100_000, 300, 200], 500) == [1, 2]


BULK_WRITER = """
import sys
from vsparta.termindex.base import TermDocument
from vsparta.termindex.embedded.index import EmbeddedIndex
index = EmbeddedIndex(sys.argv[1], create=True, block_size=64)
with index.bulk_load():
    for b in range(10_000):
        index.upsert([TermDocument(f"b{b}-{j}", {1: 1.0, 2 + j: 2.0}) for j in range(20)])
        print(b, flush=True)
"""


def test_kill_during_bulk_load_keeps_every_reported_commit(tmp_path):
    path = tmp_path / "idx"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", BULK_WRITER, str(path)], env=env, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    reported = -1
    for line in proc.stdout:
        reported = int(line)
        if reported >= 25:  # past two tier merges: the kill can land inside one
            break
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    index = EmbeddedIndex(path)
    assert index.count() >= 20 * (reported + 1)
    assert index.count() % 20 == 0  # whole commits only
    hits = index.search({1: 1.0}, k=10_000)
    assert len({h.id for h in hits}) == index.count()
    assert index.existing_ids([f"b{b}-0" for b in range(reported + 1)]) == {
        f"b{b}-0" for b in range(reported + 1)
    }
