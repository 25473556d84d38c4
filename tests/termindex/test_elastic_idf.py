"""Document frequencies and IDF-weighted queries on real Elasticsearch 7.17 and OpenSearch nodes
(``search_server``: each engine line in turn): the counts are the true ones, cached per index
version, forgotten when the alias moves; IDF-weighted top 10 == the oracle's; explanations add up;
the synchronous and async handles agree with the embedded engine on the same documents."""

from __future__ import annotations

import asyncio
import math

import pytest
from elastic_testkit import (
    SearchServer,
    check_es_top_k,
    float32_tol,
    fresh_index,
    open_on,
    random_docs,
    random_queries,
)

from vsparta.termindex.base import TermDocument
from vsparta.termindex.embedded.index import EmbeddedIndex
from vsparta.termindex.oracle import BruteForceOracle, round_like_elasticsearch
from vsparta.termindex.registry import engine, parse_spec
from vsparta.termindex.scoring import idf_weights

pytestmark = pytest.mark.elasticsearch

N_DOCS = 1500
VOCAB = 800


def true_df(docs: list[TermDocument]) -> dict[int, int]:
    df: dict[int, int] = {}
    for d in docs:
        for t in d.weights:
            df[t] = df.get(t, 0) + 1
    return df


@pytest.fixture(scope="module")
def corpus(search_server: SearchServer):
    docs = random_docs(N_DOCS, VOCAB, seed=21)
    with fresh_index(search_server, "idf", chunk_size=1000) as index:
        with index.bulk_load():
            assert index.upsert(docs) == N_DOCS
        yield index, docs


def test_statistics_are_the_true_counts_and_cached(corpus) -> None:
    index, docs = corpus
    df = true_df(docs)
    ids = sorted(df)[:150] + [VOCAB + 3]
    stats = index.term_statistics(ids)
    assert stats.n_docs == N_DOCS
    assert dict(stats.df) == {t: df.get(t, 0) for t in ids}
    assert stats.version.startswith(index.alias + "-v")  # the concrete index behind the alias
    assert len(index._statistics) == len(ids)
    calls = []
    real = index._client.msearch
    index._client.msearch = lambda **kw: calls.append(kw) or real(**kw)
    try:
        again = index.term_statistics(ids[:40])
        assert calls == []  # every term cached: no request
        assert (again.n_docs, again.version) == (N_DOCS, stats.version)
        assert dict(again.df) == {t: stats.df[t] for t in ids[:40]}
        index.term_statistics(ids[:40] + [VOCAB + 9])
        assert len(calls) == 1 and len(calls[0]["body"]) == 4  # the count + the one new term
    finally:
        index._client.msearch = real


def test_idf_top10_matches_the_oracle_and_explanations_add_up(corpus) -> None:
    index, docs = corpus
    oracle = BruteForceOracle(docs, round_weights=round_like_elasticsearch)
    exact = 0
    queries = random_queries(120, VOCAB, seed=22)
    for counts in queries:
        counts = {t: float(max(1, round(c))) for t, c in counts.items()}
        stats = index.term_statistics(counts)
        q = idf_weights(counts, stats.df, stats.n_docs)
        hits = index.search(q, k=10, explain=True)
        exact += check_es_top_k(hits, oracle, q, 10)[0]
        for h in hits:
            assert h.contributions is not None
            total = math.fsum(c for _, c in h.contributions.values())
            assert abs(total - h.score) <= float32_tol(total)
            for t, (w, c) in h.contributions.items():
                assert c == pytest.approx(q[t] * math.log1p(w), rel=1e-12)
    assert exact >= 0.95 * len(queries), exact


def test_async_handle_and_embedded_engine_give_the_same_weights(corpus, search_server, tmp_path) -> None:
    index, docs = corpus
    ids = sorted(true_df(docs))[:60]
    sync_stats = index.term_statistics(ids)
    parsed = parse_spec(search_server.spec(index.alias))

    async def read():
        reader = engine(parsed.engine).open_async(parsed, 10.0)
        try:
            return await reader.term_statistics(ids)
        finally:
            await reader.close()

    assert asyncio.run(read()) == sync_stats
    embedded = EmbeddedIndex(tmp_path / "same", create=True)
    embedded.upsert(docs)
    local = embedded.term_statistics(ids)
    assert (local.n_docs, dict(local.df)) == (sync_stats.n_docs, dict(sync_stats.df))
    counts = {t: 1.0 for t in ids[:5]}
    assert idf_weights(counts, local.df, local.n_docs) == idf_weights(
        counts, sync_stats.df, sync_stats.n_docs
    )


def test_a_new_version_behind_the_alias_empties_the_cache(search_server: SearchServer) -> None:
    docs = random_docs(200, 50, seed=23)
    with fresh_index(search_server, "idf-move") as index:
        index.upsert(docs)
        reader = open_on(search_server, index.alias)
        try:
            t = sorted(true_df(docs))[0]
            before = reader.term_statistics([t])
            assert before.df[t] == true_df(docs)[t]
            new = index.begin_reindex()
            new.upsert(docs[:50])
            new.commit()
            assert reader.term_statistics([t]) == before  # cached: the alias move is not seen yet
            assert reader.search({t: 1.0}, k=1)  # a search answers from the new version ...
            after = reader.term_statistics([t])  # ... which empties the cache
            assert after.n_docs == 50 and after.df[t] == true_df(docs[:50])[t]
            assert after.version != before.version
        finally:
            reader.close()
