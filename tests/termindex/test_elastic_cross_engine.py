"""The same few thousand documents in both engines, both checked against the brute-force oracle.

Each engine is compared with the oracle built on the weights *it* stores (Elasticsearch: 9
significant bits; embedded: half floats), so neither comparison needs a loosened tolerance: the
embedded engine must match its oracle exactly, Elasticsearch up to float32 near-ties
(``elastic_testkit.check_es_top_k``). Where the two engines' lists differ, the two oracles must
differ the same way: the difference comes from the storage rounding, not from either engine.
"""

from __future__ import annotations

import pytest
from elastic_testkit import check_es_top_k, fresh_index, random_docs, random_queries

from vsparta.termindex import open_index
from vsparta.termindex.oracle import BruteForceOracle, round_like_elasticsearch, round_like_embedded

pytestmark = pytest.mark.elasticsearch

N_DOCS = 2500
VOCAB = 1500
K = 10


def test_both_engines_match_their_oracles_on_the_same_documents(es_url: str, tmp_path) -> None:
    docs = random_docs(N_DOCS, VOCAB, seed=21)
    oracle_es = BruteForceOracle(docs, round_weights=round_like_elasticsearch)
    oracle_emb = BruteForceOracle(docs, round_weights=round_like_embedded)
    with fresh_index(es_url, "cross") as es, open_index(f"embedded:{tmp_path / 'emb'}", create=True) as emb:
        with es.bulk_load():
            assert es.upsert(docs) == N_DOCS
        assert emb.upsert(docs) == N_DOCS
        assert es.count() == emb.count() == N_DOCS
        same_lists = by_rounding = by_float32 = 0
        queries = random_queries(150, VOCAB, seed=22)
        for q in queries:
            es_hits = es.search(q, k=K)
            emb_hits = emb.search(q, k=K)
            es_exact, _ = check_es_top_k(es_hits, oracle_es, q, K)
            want = oracle_emb.search(q, k=K)
            assert [(h.id, h.score) for h in emb_hits] == [(h.id, h.score) for h in want], q
            if [h.id for h in es_hits] == [h.id for h in emb_hits]:
                same_lists += 1
            elif [h.id for h in oracle_es.search(q, k=K)] != [h.id for h in want]:
                by_rounding += 1  # the two storage roundings rank differently
            else:
                assert not es_exact, q  # otherwise only a (bounded) float32 near-tie may explain it
                by_float32 += 1
        assert same_lists >= 0.8 * len(queries), (same_lists, by_rounding, by_float32)
