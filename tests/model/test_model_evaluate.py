"""Evaluation helpers: the sparse index scorer, query counts, image sets (1K folds, 5K)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from vsparta.model.evaluate import (
    Queries,
    SparseImages,
    fold_recalls,
    folds,
    query_matrix,
    sparse_scores,
    weighted_queries,
)
from vsparta.termindex.scoring import idf_weights


def test_sparse_scores_are_sums_of_count_times_log1p() -> None:
    images = SparseImages(
        ids=[np.array([5, 2], dtype=np.int32), np.array([2], dtype=np.int32)],
        values=[np.array([3.0, 1.0], dtype=np.float32), np.array([0.5], dtype=np.float32)],
        vocab_size=8,
    )
    queries = Queries(["x", "y"], [[5, 2, 5], [7]], np.array([0, 1]))
    qmat = query_matrix(queries, 8)
    assert qmat[0, 5] == 2.0 and qmat[0, 2] == 1.0  # repeated token counted per occurrence
    scores = sparse_scores(images.term_matrix(None), qmat)
    assert np.allclose(scores[0], [2 * math.log1p(3.0) + math.log1p(1.0), math.log1p(0.5)])
    assert np.allclose(scores[1], [0.0, 0.0])
    top1 = sparse_scores(images.term_matrix(1), qmat)  # only each image's best term survives
    assert np.allclose(top1[0], [2 * math.log1p(3.0), math.log1p(0.5)])


def test_image_sets_and_fold_recalls() -> None:
    assert list(folds(500)) == ["500"]
    f = folds(2500)
    assert list(f) == ["2500", "1K"] and len(f["1K"]) == 2 and f["1K"][1][0] == 1000
    assert list(folds(6000)) == ["6000", "1K", "5K"] and len(folds(6000)["1K"]) == 5
    n = 2000
    targets = np.repeat(np.arange(n), 2)
    scores = np.zeros((len(targets), n))
    scores[np.arange(len(targets)), targets] = 1.0  # a perfect scorer
    rows = np.arange(0, len(targets), 2)
    scores[rows, (targets[rows] + 1) % n] = 2.0  # every other query prefers its neighbour
    res = fold_recalls(scores, targets, n)
    assert res["2000"]["R@1"] == 50.0 and res["2000"]["R@5"] == 100.0
    # within a 1K fold, the last image's neighbour lies outside it, so that query is right there
    assert abs(res["1K"]["R@1"] - 100 * 1001 / 2000) < 1e-9


def test_idf_query_weights_are_the_services_over_the_evaluated_images() -> None:
    """The evaluation weights a query as ``vsparta serve --query-weights idf`` would over an index
    of the same images: count x IDF of each token's document frequency among them."""
    images = SparseImages(
        ids=[np.array(t, dtype=np.int32) for t in ([5, 2], [2], [3])],
        values=[np.array(v, dtype=np.float32) for v in ([3.0, 1.0], [0.5], [1.0])],
        vocab_size=8,
    )
    terms = images.term_matrix(None)
    queries = Queries(["x"], [[5, 2, 5, 7]], np.array([0]))
    qmat = query_matrix(queries, 8)
    counts = weighted_queries(qmat, terms, "counts")
    assert counts.dtype == qmat.dtype and (counts != qmat).nnz == 0
    saturated = weighted_queries(qmat, terms, "saturated")  # "5" twice: (1.2 + 1) 2 / (1.2 + 2)
    assert {int(t): float(saturated[0, t]) for t in (5, 2, 7)} == {5: 1.375, 2: 1.0, 7: 1.0}
    idf = weighted_queries(qmat, terms, "idf")
    service = idf_weights({5: 2.0, 2: 1.0, 7: 1.0}, {5: 1, 2: 2, 7: 0}, 3)
    assert {int(t): float(idf[0, t]) for t in (5, 2, 7)} == service
    scores = sparse_scores(terms, idf)
    expected = service[5] * math.log1p(3.0) + service[2] * math.log1p(1.0)
    assert scores[0, 0] == pytest.approx(expected, rel=1e-6)
    with pytest.raises(ValueError, match="counts, idf"):
        weighted_queries(qmat, terms, "bm25")
