"""Block-max WAND (``track_total_hits=False``) on Elasticsearch and OpenSearch returns the same
top k as scoring every match (each engine line in turn: ``search_server``). That every engine's top
k is the oracle's at its rounding is the conformance suite's (``test_engine_conformance.py``)."""

from __future__ import annotations

import pytest
from elastic_testkit import (
    SearchServer,
    fresh_index,
    open_on,
    random_docs,
    random_queries,
)

from vsparta.termindex.oracle import BruteForceOracle, round_like_elasticsearch

pytestmark = pytest.mark.elasticsearch

N_DOCS = 3000
VOCAB = 2000
N_QUERIES = 300
K = 10


@pytest.fixture(scope="module")
def corpus(search_server: SearchServer):
    docs = random_docs(N_DOCS, VOCAB, seed=7)
    with fresh_index(search_server, "parity", chunk_size=1000) as index:
        with index.bulk_load():
            assert index.upsert(docs) == N_DOCS
        assert index.count() == N_DOCS
        yield index, docs, BruteForceOracle(docs, round_weights=round_like_elasticsearch)


def test_wand_option_returns_the_same_hits(corpus, search_server: SearchServer) -> None:
    """``track_total_hits=False`` (block-max WAND) may skip work, never change the top k."""
    index, _, _ = corpus
    wand = open_on(search_server, index.alias, track_total_hits=False)
    try:
        for q in random_queries(60, VOCAB, seed=12):
            assert [(h.id, h.score) for h in wand.search(q, k=K)] == [
                (h.id, h.score) for h in index.search(q, k=K)
            ]
    finally:
        wand.close()
    with pytest.raises(ValueError, match="track_total_hits must be true or false"):
        open_on(search_server, index.alias, track_total_hits="no")
