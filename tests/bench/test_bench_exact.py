"""The scipy oracle equals a brute-force loop, and the agreement metric counts ties fairly."""

from __future__ import annotations

import numpy as np
import pytest

from vsparta.bench import exact
from vsparta.bench.corpus import Corpus
from vsparta.bench.synthetic import SyntheticSpec, generate_queries, load_or_generate
from vsparta.termindex.base import score as reference_score


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return load_or_generate(SyntheticSpec(200, n_terms=100, seed=1), tmp_path_factory.mktemp("cache"))


def test_scipy_top10_equals_brute_force(corpus):
    matrix = exact.build_matrix(corpus)
    for q in generate_queries(25, seed=1):
        got = exact.top_k(exact.scores(matrix, q), 10).tolist()
        assert got == exact.brute_force_top_k(corpus, q, 10)


def test_scores_match_termindex_reference(corpus):
    matrix = exact.build_matrix(corpus)
    q = generate_queries(1, seed=2)[0]
    s = exact.scores(matrix, q)
    for row in (0, 57, 199):
        idx, w = corpus.row(row)
        ref = reference_score(q, dict(zip(idx.tolist(), w.tolist(), strict=True)))
        assert s[row] == pytest.approx(ref, rel=1e-5)


def test_streaming_oracle_equals_brute_force(corpus):
    queries = generate_queries(15, seed=4)
    oracle = exact.StreamingOracle(corpus, queries, 10, chunk=33)  # chunks that do not divide N
    for qi, q in enumerate(queries):
        best = exact.brute_force_top_k(corpus, q, 10)
        assert oracle.agreement(qi, best) == 1.0
        assert oracle.kth(qi) == pytest.approx(oracle.score_of(qi, best[-1]), rel=1e-9)
        assert oracle.n_best(qi) == len(best)
        assert oracle.agreement(qi, best[:5]) == pytest.approx(min(5, len(best)) / len(best))
        worst = [r for r in range(corpus.n_docs) if r not in best][-10:]
        assert oracle.agreement(qi, worst) < 1.0


def test_ties_broken_by_row_and_zero_scores_dropped():
    s = np.array([0.0, 2.0, 1.0, 2.0, 0.0, 1.0], dtype=np.float32)
    assert exact.top_k(s, 3).tolist() == [1, 3, 2]
    assert exact.top_k(s, 10).tolist() == [1, 3, 2, 5]


def test_agreement_counts_ties_at_the_boundary():
    s = np.array([5.0, 4.0, 3.0, 3.0, 1.0], dtype=np.float32)
    assert exact.agreement([0, 1, 2], s, 3) == 1.0
    assert exact.agreement([0, 1, 3], s, 3) == 1.0  # row 3 ties the 3rd best
    assert exact.agreement([0, 1, 4], s, 3) == pytest.approx(2 / 3)
    assert exact.agreement([0, 0, 0], s, 3) == pytest.approx(1 / 3)  # duplicates count once


def test_corpus_head_and_term_documents():
    c = Corpus(
        np.array([0, 2, 3]),
        np.array([5, 9, 7], dtype=np.uint16),
        np.array([0.5, 1.0, 2.0], np.float32),
        30522,
    )
    docs = list(c.term_documents())
    assert [d.id for d in docs] == ["img0000000", "img0000001"]
    assert docs[0].weights == {5: 0.5, 9: 1.0} and docs[1].weights == {7: 2.0}
    assert c.head(1).nnz == 2 and c.row_of("img0000001") == 1


def test_chunked_inversion_equals_scipy_tocsc(corpus, monkeypatch):
    import scipy.sparse as sp

    from vsparta.bench import invert

    monkeypatch.setattr(invert, "CHUNK_POSTINGS", 3_000)  # many chunks, not aligned with rows
    m = exact.build_matrix(corpus)
    ref = sp.csr_matrix(
        (np.log1p(np.asarray(corpus.weights)), np.asarray(corpus.indices, dtype=np.int32), corpus.indptr),
        shape=(corpus.n_docs, corpus.vocab_size),
    ).tocsc()
    assert np.array_equal(m.indptr, ref.indptr)
    assert np.array_equal(m.indices, ref.indices)
    assert np.array_equal(m.data, ref.data)


@pytest.mark.parametrize("positive_share", [0.001, 0.3, 0.9, 1.0])
def test_top_k_equals_a_full_sort_whether_scores_are_mostly_zero_or_not(positive_share):
    rng = np.random.default_rng(3)
    scores = np.where(rng.random(20_000) < positive_share, rng.integers(1, 50, 20_000), 0).astype(np.float32)
    for k in (1, 10, 100):
        rows = np.flatnonzero(scores > 0)
        want = rows[np.lexsort((rows, -scores[rows]))][:k]
        assert exact.top_k(scores, k).tolist() == want.tolist()
