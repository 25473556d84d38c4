"""Query-side IDF weights (``termindex.scoring``): the rule, the cache, and the embedded engine's
statistics and scores with IDF weights (parity with the oracle, explanations that add up)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from vsparta.termindex.base import MAX_QUERY_WEIGHT, TermDocument, TermStatistics
from vsparta.termindex.elastic.statistics import StatisticsCache, parse_statistics
from vsparta.termindex.embedded.index import EmbeddedIndex
from vsparta.termindex.errors import InvalidQuery, TermIndexError
from vsparta.termindex.oracle import BruteForceOracle, random_documents, random_queries, round_like_embedded
from vsparta.termindex.scoring import idf_array, idf_weights, weigh_counts

VOCAB = 500


def true_df(docs: list[TermDocument]) -> tuple[int, dict[int, int]]:
    latest = {d.id: d for d in docs}
    df: dict[int, int] = {}
    for d in latest.values():
        for t in d.weights:
            df[t] = df.get(t, 0) + 1
    return len(latest), df


def test_idf_is_bm25s_and_always_positive() -> None:
    n = 1000
    assert idf_array(0, n) == pytest.approx(math.log(1 + (n + 0.5) / 0.5))
    assert idf_array(10, n) == pytest.approx(math.log(1 + (n - 10 + 0.5) / 10.5))
    everywhere = float(idf_array(n, n))
    assert 0 < everywhere < 1e-3  # a word in every image ("a") all but vanishes, never 0
    assert float(idf_array(n + 5, n)) == everywhere  # a count past the total is clamped
    ordered = idf_array(np.arange(n + 1), n)
    assert np.all(np.diff(ordered) < 0)  # rarer weighs more


def test_weights_are_count_times_idf_as_float32_within_the_query_bound() -> None:
    stats = TermStatistics(300, {1: 300, 2: 10})
    w = idf_weights({1: 1.0, 2: 2.0, 3: 1.0}, stats.df, stats.n_docs)
    assert w[2] == float(np.float32(2.0 * idf_array(10, 300)))
    assert w[3] == float(np.float32(idf_array(0, 300)))  # a term the index lacks
    assert 0 < w[1] < 0.01 < w[3] < w[2]
    for v in w.values():
        assert float(np.float32(v)) == v  # exactly a float32: what ES keeps of a boost
    huge = weigh_counts([1e9], [0], 10**6)
    assert float(huge[0]) == MAX_QUERY_WEIGHT


def test_cache_bound_age_and_version() -> None:
    now = [0.0]
    cache = StatisticsCache(max_terms=3, max_age_s=10, clock=lambda: now[0])
    assert cache.missing([5, 1, 1]) == [1, 5]
    cache.store("v1", 100, {1: 3, 5: 7})
    assert cache.missing([1, 5, 9]) == [9]
    assert cache.statistics([1, 5, 9]) == TermStatistics(100, {1: 3, 5: 7}, "v1")
    cache.store("v1", 101, {9: 1, 11: 2})  # 4 terms > 3: the least recently used (1) goes
    assert len(cache) == 3 and cache.missing([1, 5]) == [1]
    now[0] = 11.0
    assert cache.missing([5]) == [5]  # too old
    cache.seen_version("v1")
    assert len(cache) == 3
    cache.seen_version("v2")  # the alias moved: everything goes
    assert len(cache) == 0 and cache.version is None
    cache.store("v2", 5, {1: 1})
    cache.store("v3", 6, {2: 1})  # a fill from another version starts over
    assert cache.statistics([1, 2]) == TermStatistics(6, {2: 1}, "v3")
    with pytest.raises(ValueError):
        StatisticsCache(max_terms=0)


def test_a_failed_statistics_request_says_why_even_when_only_its_cause_does() -> None:
    """A failed fetch phase (OpenSearch 2.19, a node SIGKILLed) has an empty reason: the cause is the why."""
    shards = {"total": 2, "successful": 2, "failed": 0}
    whole = {"_shards": shards, "hits": {"hits": [], "total": {"value": 4}}}
    cause = {"type": "node_not_connected_exception", "reason": "[n1][127.0.0.58:9300] Node not connected"}
    failed = {"error": {"root_cause": [], "type": "search_phase_execution_exception", "reason": "",
                        "caused_by": cause}, "status": 500}  # fmt: skip
    why = r"search_phase_execution_exception: node_not_connected_exception: \[n1\]\[127.0.0.58:9300\] Node"
    with pytest.raises(TermIndexError, match=why):
        parse_statistics({"responses": [whole, failed]}, [7])
    assert parse_statistics({"responses": [whole, whole]}, [7]) == ("", 4, {7: 4})


@pytest.fixture(scope="module")
def docs() -> list[TermDocument]:
    return random_documents(1500, vocab_size=VOCAB, seed=3)


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory, docs: list[TermDocument]) -> EmbeddedIndex:
    """Small blocks (dense and sparse runs both occur) and several segments."""
    idx = EmbeddedIndex(tmp_path_factory.mktemp("idf") / "index", create=True, block_size=256, max_segments=8)
    for start in range(0, len(docs), 400):
        idx.upsert(docs[start : start + 400])
    assert idx.segment_count() > 1
    return idx


def test_embedded_statistics_are_the_true_document_frequencies(index: EmbeddedIndex, docs) -> None:
    n, df = true_df(docs)
    ids = sorted(df)[:200] + [VOCAB + 7]
    stats = index.term_statistics(ids)
    assert stats.n_docs == n == index.count()
    assert dict(stats.df) == {t: df.get(t, 0) for t in ids}
    assert stats.version == f"generation {index.generation}"
    dense = max(df, key=df.get)  # the commonest term: dense runs at block_size 256
    assert index.term_statistics([dense]).df[dense] == df[dense] > 128
    with pytest.raises(InvalidQuery):
        index.term_statistics([-1])


def test_embedded_statistics_follow_a_new_generation(tmp_path, docs) -> None:
    idx = EmbeddedIndex(tmp_path / "index", create=True)
    idx.upsert(docs[:100])
    t = next(iter(docs[0].weights))
    before = idx.term_statistics([t])
    idx.upsert([TermDocument("extra", {t: 1.0})])
    after = idx.term_statistics([t])
    assert after.n_docs == before.n_docs + 1 and after.df[t] == before.df[t] + 1
    assert after.version != before.version


def test_embedded_top10_with_idf_weights_matches_the_oracle(index: EmbeddedIndex, docs) -> None:
    """Non-integer (float32) query weights: ids and scores identical to the oracle's, and each
    hit's contributions add up to its score."""
    oracle = BruteForceOracle(docs, round_weights=round_like_embedded)
    checked = 0
    for counts in random_queries(150, vocab_size=VOCAB, seed=4):
        counts = {t: float(max(1, round(c))) for t, c in counts.items()}
        stats = index.term_statistics(counts)
        q = idf_weights(counts, stats.df, stats.n_docs)
        assert any(v != int(v) for v in q.values())
        got = index.search(q, k=10, explain=True)
        assert [(h.id, h.score) for h in got] == [(h.id, h.score) for h in oracle.search(q, k=10)]
        for h in got:
            assert h.contributions is not None
            assert math.fsum(c for _, c in h.contributions.values()) == pytest.approx(h.score, rel=1e-12)
            for t, (w, c) in h.contributions.items():
                assert c == q[t] * float(np.log1p(w))  # the engine's saturate_array
        checked += len(got)
    assert checked > 1000
