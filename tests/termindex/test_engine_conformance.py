"""The engine conformance suite: what every engine plug-in must do, run on each one the registry
knows (embedded, Elasticsearch 7.17, OpenSearch 2.19 and 3.x; ``conformance.TARGETS``).

Reads against the brute-force oracle (``termindex/oracle.py``) at the engine's own rounding, ties
by id; explanations that add up to the score; term statistics; "more like this"; which ids exist;
a bulk load and its end; writes that replace and delete; every kind of bad input refused with a
``termindex.errors`` type and nothing lost; an index that survives being opened again.
docs/architecture.md section 4 says what a new engine must pass; tests of one engine's own parts
(segments and merges, versions behind an alias, node loss ...) stay in that engine's test files.
"""

from __future__ import annotations

import math

import pytest
from conformance import TARGETS, Running, check_top_k, running_target, similar_expected
from elastic_testkit import random_docs, random_queries

from vsparta.termindex import registry
from vsparta.termindex.base import MAX_QUERY_WEIGHT

N_DOCS = 2000
VOCAB = 1500
K = 10


@pytest.fixture(scope="module", params=list(TARGETS))
def running(request: pytest.FixtureRequest) -> Running:
    return running_target(request.param, request)


@pytest.fixture(scope="module")
def corpus(running: Running):
    """Documents with Zipf-like terms, 5 % exact copies under other ids (ties occur), loaded in two
    writes inside ``bulk_load`` and ended by ``finish_load``, as the indexing job does."""
    docs = random_docs(N_DOCS, VOCAB, seed=7)
    with running.fresh("corpus") as (index, _spec):
        with index.bulk_load() as loading:
            assert loading is index
            assert index.upsert(docs[:1200]) == 1200
            assert index.upsert(docs[1200:]) == N_DOCS - 1200
        note = index.finish_load()
        assert note is None or (isinstance(note, str) and "\n" not in note)
        assert index.count() == N_DOCS
        yield index, docs, running.oracle(docs)


def test_every_registered_engine_is_a_target() -> None:
    """A new engine in ``termindex.registry.PLUGINS`` fails here until ``conformance.TARGETS`` runs it."""
    assert {e.name for e in registry.engines()} == {t.engine for t in TARGETS.values()}


def test_top_k_is_the_oracles_at_the_engines_rounding_ties_by_id(running: Running, corpus) -> None:
    index, _docs, oracle = corpus
    queries = random_queries(300, VOCAB, seed=11)
    exact = tied = 0
    for q in queries:
        same, tie = check_top_k(running, index.search(q, k=K), oracle, q, K)
        exact, tied = exact + same, tied + tie
    assert exact >= 0.95 * len(queries), exact  # float32 engines: only near-ties may differ
    assert tied > 0, "the corpus should produce exact score ties in some top-10 lists"
    for q in queries[:40]:
        check_top_k(running, index.search(q, k=1), oracle, q, 1)
        check_top_k(running, index.search(q, k=50), oracle, q, 50)
    rare = {next(iter(_docs[7].weights)): 1.0}  # k beyond the matches: every match, no more
    assert len(index.search(rare, k=10_000)) == len(oracle.search(rare, k=10_000))


def test_queries_at_the_largest_weight_stay_exact(running: Running, corpus) -> None:
    """Every weight at ``MAX_QUERY_WEIGHT`` (the most a request may carry), or mixed with tiny ones."""
    index, _, oracle = corpus
    queries = random_queries(100, VOCAB, seed=13)
    exact = 0
    for j, q in enumerate(queries):
        q = {t: MAX_QUERY_WEIGHT if j % 2 or i == 0 else 0.001 for i, t in enumerate(q)}
        exact += check_top_k(running, index.search(q, k=K), oracle, q, K)[0]
    assert exact >= 0.95 * len(queries), exact


def test_explanations_add_up_to_the_score(running: Running, corpus) -> None:
    index, docs, _ = corpus
    by_id = {d.id: d for d in docs}
    for q in random_queries(40, VOCAB, seed=5):
        plain = index.search(q, k=5)
        explained = index.search(q, k=5, explain=True)
        assert [(h.id, h.score) for h in explained] == [(h.id, h.score) for h in plain]
        for h in explained:
            stored = running.stored(by_id[h.id].weights)
            assert h.contributions is not None and set(h.contributions) == {t for t in q if t in stored}
            for t, (w, part) in h.contributions.items():
                assert w == stored[t]
                # float64 engines compute each part as the oracle does; float32 ones report it so
                rel = 1e-12 if running.target.float32 else 1e-15
                assert part == pytest.approx(q[t] * math.log1p(w), rel=rel)
            total = sum(part for _, part in h.contributions.values())
            assert abs(total - h.score) <= running.score_tol(total)
            assert h.metadata == by_id[h.id].metadata


def test_term_statistics_are_the_true_counts(running: Running, corpus) -> None:
    index, docs, _ = corpus
    df: dict[int, int] = {}
    for d in docs:
        for t in d.weights:
            df[t] = df.get(t, 0) + 1
    asked = sorted(df)[:120] + [VOCAB + 7]  # a term no document holds: 0
    stats = index.term_statistics(asked)
    assert stats.n_docs == N_DOCS
    assert dict(stats.df) == {t: df.get(t, 0) for t in asked}
    assert isinstance(stats.version, str) and stats.version  # names the state the counts are of
    assert index.term_statistics(asked[:5]).version == stats.version  # nothing written since


def test_similar_is_a_search_by_the_documents_heaviest_terms_without_itself(running: Running, corpus) -> None:
    index, docs, oracle = corpus
    for doc, k, n_terms in ((docs[42], 5, 32), (docs[500], 10, 8), (docs[1999], 1, 64)):
        hits = index.similar(doc.id, k=k, n_terms=n_terms)
        want = similar_expected(running, oracle, doc.weights, doc.id, k, n_terms)
        assert len(hits) == len(want) == k and doc.id not in {h.id for h in hits}
        if not running.target.float32:
            assert [(h.id, h.score) for h in hits] == [(h.id, h.score) for h in want]
        for h, e in zip(hits, want, strict=True):
            assert abs(h.score - e.score) <= running.score_tol(e.score)
        explained = index.similar(doc.id, k=k, n_terms=n_terms, explain=True)
        assert [h.id for h in explained] == [h.id for h in hits] and all(h.contributions for h in explained)


def test_get_existing_ids_and_their_metadata(running: Running, corpus) -> None:
    index, docs, _ = corpus
    for d in docs[::157]:
        got = index.get(d.id)
        assert (got.id, dict(got.weights), dict(got.metadata)) == (
            d.id,
            running.stored(d.weights),
            d.metadata,
        )
    asked = [docs[0].id, docs[1999].id, "no-such-doc", docs[3].id]
    assert index.existing_ids(asked) == {docs[0].id, docs[1999].id, docs[3].id}
    assert index.existing_ids([]) == set()
    # what a resumed indexing job compares: each stored document's metadata, as written
    assert index.existing_metadata(asked) == {d.id: d.metadata for d in (docs[0], docs[1999], docs[3])}
    assert index.existing_metadata([]) == {}
    ids = list(index.iter_ids())  # what `vsparta index --prune` lists: every id once
    assert len(ids) == N_DOCS and set(ids) == {d.id for d in docs}
