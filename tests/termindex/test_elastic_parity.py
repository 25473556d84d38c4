"""Elasticsearch top-10 == brute-force oracle, on a few thousand random documents.

Rounding (9 significant bits per stored weight) and float32 scoring are handled explicitly by
``elastic_testkit.check_es_top_k``: the oracle runs on ``round_like_elasticsearch`` weights, and
only float32 near-ties (within a derived error bound) may differ from its order.
"""

from __future__ import annotations

import math

import pytest
from elastic_testkit import check_es_top_k, float32_tol, fresh_index, random_docs, random_queries

from vsparta.termindex.oracle import BruteForceOracle, round_like_elasticsearch

pytestmark = pytest.mark.elasticsearch

N_DOCS = 3000
VOCAB = 2000
N_QUERIES = 300
K = 10


@pytest.fixture(scope="module")
def corpus(es_url: str):
    docs = random_docs(N_DOCS, VOCAB, seed=7)
    with fresh_index(es_url, "parity", chunk_size=1000) as index:
        with index.bulk_load():
            assert index.upsert(docs) == N_DOCS
        assert index.count() == N_DOCS
        yield index, docs, BruteForceOracle(docs, round_weights=round_like_elasticsearch)


def test_top10_matches_oracle_on_es_rounded_weights(corpus) -> None:
    index, docs, oracle = corpus
    exact_lists = tied_lists = 0
    for q in random_queries(N_QUERIES, VOCAB, seed=11):
        exact, tied = check_es_top_k(index.search(q, k=K), oracle, q, K)
        exact_lists += exact
        tied_lists += tied
    # The check is not vacuous: most lists are identical, ties really occurred.
    assert exact_lists >= 0.95 * N_QUERIES, exact_lists
    assert tied_lists > 0, "the corpus should produce exact score ties in some top-10s"


def test_explain_contributions_add_up_to_the_score(corpus) -> None:
    index, docs, _ = corpus
    by_id = {d.id: d for d in docs}
    for q in random_queries(30, VOCAB, seed=5):
        for h in index.search(q, k=5, explain=True):
            assert h.contributions is not None
            stored = by_id[h.id].weights
            assert set(h.contributions) == {t for t in q if t in stored}
            for t, (w, c) in h.contributions.items():
                assert w == float(round_like_elasticsearch(stored[t]))
                assert c == pytest.approx(q[t] * math.log1p(w), rel=1e-12)
            total = sum(c for _, c in h.contributions.values())
            assert abs(total - h.score) <= float32_tol(total)


def test_similar_excludes_itself_and_matches_oracle(corpus) -> None:
    index, docs, oracle = corpus
    doc = docs[42]
    hits = index.similar(doc.id, k=5)
    assert doc.id not in [h.id for h in hits] and len(hits) == 5
    # The query is the document's heaviest terms as Elasticsearch keeps them (ties by id).
    kept = {t: float(round_like_elasticsearch(w)) for t, w in doc.weights.items()}
    query = dict(sorted(kept.items(), key=lambda kv: (-kv[1], kv[0]))[:32])
    expected = [h for h in oracle.search(query, k=6) if h.id != doc.id][:5]
    assert len(expected) == 5
    for h, e in zip(hits, expected, strict=True):
        assert abs(h.score - e.score) <= float32_tol(e.score)


def test_wand_option_returns_the_same_hits(corpus, es_url: str) -> None:
    """``track_total_hits=False`` (block-max WAND) may skip work, never change the top k."""
    from vsparta.termindex.elastic.index import ElasticsearchIndex

    index, _, _ = corpus
    wand = ElasticsearchIndex(es_url, index.alias, track_total_hits=False)
    try:
        for q in random_queries(60, VOCAB, seed=12):
            assert [(h.id, h.score) for h in wand.search(q, k=K)] == [
                (h.id, h.score) for h in index.search(q, k=K)
            ]
    finally:
        wand.close()
    with pytest.raises(ValueError, match="track_total_hits must be true or false"):
        ElasticsearchIndex(es_url, index.alias, track_total_hits="no")


def test_top10_matches_oracle_at_the_largest_query_weight(corpus) -> None:
    """Queries whose every weight is ``MAX_QUERY_WEIGHT`` (the bound the service accepts), or mixes
    it with small ones: still exact (float32 sums do not overflow or lose the order)."""
    from vsparta.termindex.base import MAX_QUERY_WEIGHT

    index, _, oracle = corpus
    exact_lists = 0
    queries = random_queries(100, VOCAB, seed=13)
    for j, q in enumerate(queries):
        q = {t: MAX_QUERY_WEIGHT if j % 2 or i == 0 else 0.001 for i, t in enumerate(q)}
        exact, _ = check_es_top_k(index.search(q, k=K), oracle, q, K)
        exact_lists += exact
    assert exact_lists >= 0.95 * len(queries), exact_lists
