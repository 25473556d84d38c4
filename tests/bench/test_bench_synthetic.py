"""The generator is deterministic, prefix-consistent, and shaped like a trained model's top-n lists."""

from __future__ import annotations

import numpy as np
import pytest

from vsparta.bench.synthetic import FIRST_REAL_ID, SyntheticSpec, generate_queries, load_or_generate


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return load_or_generate(SyntheticSpec(600, n_terms=200, seed=7), tmp_path_factory.mktemp("cache"))


def test_same_seed_same_documents(tmp_path, corpus):
    again = load_or_generate(SyntheticSpec(600, n_terms=200, seed=7), tmp_path)  # fresh cache: regenerated
    assert np.array_equal(again.indices, corpus.indices)
    assert np.array_equal(again.weights, corpus.weights)
    other = load_or_generate(SyntheticSpec(600, n_terms=200, seed=8), tmp_path)
    assert not np.array_equal(other.indices, corpus.indices)


def test_smaller_size_is_prefix_and_served_from_cache(tmp_path, corpus):
    small = load_or_generate(SyntheticSpec(300, n_terms=200, seed=7), tmp_path)
    assert np.array_equal(small.indices, corpus.indices[: 300 * 200])
    cached = load_or_generate(SyntheticSpec(600, n_terms=200, seed=7), tmp_path)
    served = load_or_generate(SyntheticSpec(100, n_terms=200, seed=7), tmp_path)
    assert served.n_docs == 100 and np.array_equal(served.weights, cached.weights[: 100 * 200])


def test_every_image_has_n_distinct_ascending_real_terms(corpus):
    assert corpus.n_docs == 600 and corpus.nnz == 600 * 200
    rows = np.asarray(corpus.indices).reshape(600, 200).astype(np.int64)
    assert (np.diff(rows, axis=1) > 0).all()  # distinct and ascending within each image
    assert rows.min() >= FIRST_REAL_ID and rows.max() < corpus.vocab_size


def test_weights_positive_and_heavy_tailed(corpus):
    w = np.asarray(corpus.weights)
    assert w.dtype == np.float32 and (w > 0).all() and np.isfinite(w).all()
    median, p99 = np.percentile(w, [50, 99])
    assert 0.2 < median < 0.6
    assert p99 > 8 * median  # log-normal right tail
    assert w.mean() > median


def test_document_frequency_is_zipf_like(tmp_path):
    corpus = load_or_generate(SyntheticSpec(300, n_terms=1000, seed=7), tmp_path)
    assert corpus.nnz == 300 * 1000
    df = np.sort(np.bincount(np.asarray(corpus.indices, dtype=np.int64)))[::-1]
    df = df[df > 0]
    assert df[0] > 0.5 * corpus.n_docs  # common word-pieces in most images
    assert df[len(df) // 2] < 0.05 * corpus.n_docs  # the median term is rare
    ranks = np.arange(1, 501)
    slope = np.polyfit(np.log(ranks + 100), np.log(df[:500]), 1)[0]
    assert -2.0 < slope < -0.3  # a power-law decay, not flat, not a cliff


def test_queries_are_caption_like():
    queries = generate_queries(300, seed=3)
    assert queries == generate_queries(300, seed=3)
    lengths = [sum(q.values()) for q in queries]
    assert min(lengths) >= 8 and max(lengths) <= 12
    assert any(max(q.values()) > 1 for q in queries)  # repeated tokens counted
    assert all(FIRST_REAL_ID <= t for q in queries for t in q)


def test_bad_spec_raises():
    with pytest.raises(ValueError, match="n_docs"):
        SyntheticSpec(0)
    with pytest.raises(ValueError, match="n_terms"):
        SyntheticSpec(10, n_terms=40_000)
