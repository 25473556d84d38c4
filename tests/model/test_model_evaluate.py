"""Evaluation helpers: the sparse index scorer, query counts, image sets (1K folds, 5K)."""

from __future__ import annotations

import math

import numpy as np

from vsparta.model.evaluate import Queries, SparseImages, fold_recalls, folds, query_matrix, sparse_scores


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
