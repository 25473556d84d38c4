"""Metrics against hand-computed cases and against the rouge_score package."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from rouge_score import rouge_scorer

from vsparta.model.metrics import _lcs_length, caption_relevance, ndcg_at_k, recall_at_k, rouge_l


def test_recall_hand_computed() -> None:
    scores = np.array(
        [
            [0.9, 0.1, 0.2, 0.3],  # right image 0 ranks 1st
            [0.5, 0.4, 0.9, 0.1],  # right image 1 ranks 3rd
            [0.1, 0.2, 0.3, 0.4],  # right image 2 ranks 2nd
        ]
    )
    out = recall_at_k(scores, np.array([0, 1, 2]), ks=(1, 2, 3))
    assert out == pytest.approx({"R@1": 100 / 3, "R@2": 200 / 3, "R@3": 100.0})
    assert list(recall_at_k(scores, [0, 1, 2])) == ["R@1", "R@5", "R@10"]


def test_recall_ties_are_pessimistic() -> None:
    flat = np.zeros((3, 4))
    assert recall_at_k(flat, np.array([0, 1, 2]), ks=(1, 3, 4)) == {"R@1": 0.0, "R@3": 0.0, "R@4": 100.0}
    # right image tied with one other at the top: rank 2, not 1
    scores = np.array([[1.0, 1.0, 0.0]])
    assert recall_at_k(scores, np.array([0]), ks=(1, 2)) == {"R@1": 0.0, "R@2": 100.0}


def test_recall_validates_inputs() -> None:
    with pytest.raises(ValueError, match="shape"):
        recall_at_k(np.zeros((2, 3)), np.array([0]))
    with pytest.raises(ValueError, match="indices"):
        recall_at_k(np.zeros((1, 3)), np.array([3]))
    with pytest.raises(ValueError, match="NaN"):
        recall_at_k(np.array([[np.nan, 1.0]]), np.array([0]))
    with pytest.raises(ValueError, match="ks"):
        recall_at_k(np.zeros((1, 3)), np.array([0]), ks=(0,))


def test_rouge_l_hand_computed() -> None:
    # LCS("the red circle is left", "a red circle left of the square") = red circle left = 3
    cand, ref = "The red circle is left", "a red circle left of the square"
    p, r = 3 / 5, 3 / 7
    assert rouge_l(cand, ref, beta=1.0) == pytest.approx(2 * p * r / (p + r))
    b2 = 1.2**2
    assert rouge_l(cand, ref) == pytest.approx((1 + b2) * p * r / (r + b2 * p))
    assert rouge_l("same words here", "Same, words; here!") == pytest.approx(1.0)
    assert rouge_l("", "anything") == 0.0
    assert rouge_l("apple", "banana") == 0.0


SENTENCES = [
    "a red circle to the left of a blue square",
    "A small green star above a large yellow triangle.",
    "two shapes: a circle and a square",
    "the blue square is right of the red circle",
    "red, blue and green shapes on a grey background",
    "a purple hexagon in the middle next to an orange cross",
    "circle circle circle square",
    "nothing in common at all",
]


@pytest.mark.parametrize("cand", SENTENCES)
def test_rouge_l_matches_rouge_score_package(cand: str) -> None:
    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)
    for ref in SENTENCES:
        expected = scorer.score(ref, cand)["rougeL"]  # score(target, prediction)
        assert rouge_l(cand, ref, beta=1.0) == pytest.approx(expected.fmeasure, abs=1e-12)
        # our β=1.2 value combines the package's precision and recall
        p, r = expected.precision, expected.recall
        f12 = 0.0 if p == 0 or r == 0 else (1 + 1.44) * p * r / (r + 1.44 * p)
        assert rouge_l(cand, ref) == pytest.approx(f12, abs=1e-12)


def test_caption_relevance_is_tern_multi_reference_rouge() -> None:
    queries = ["a red circle left of a blue square", "green star"]
    images = [
        ["a red circle left of a blue square", "two shapes"],
        ["a green star", "a star that is green and small", "red square"],
        [],
    ]
    rel = caption_relevance(queries, images)
    assert rel.shape == (3 - 1, 3)
    assert rel[0, 0] == pytest.approx(1.0)  # the query is one of the image's captions
    assert np.all(rel[:, 2] == 0.0)  # no captions, no relevance
    # query 1 vs image 1: best precision 2/2 (from either of the first two), best recall 2/3
    p, r = 1.0, 2 / 3
    assert rel[1, 1] == pytest.approx((1 + 1.44) * p * r / (r + 1.44 * p))
    # max P and max R are taken separately, which can exceed the best single-caption ROUGE-L
    assert rel[1, 1] >= max(rouge_l(queries[1], c) for c in images[1])


def test_caption_relevance_vectorised_equals_pairwise() -> None:
    rng = np.random.default_rng(0)
    words = "a the red blue green circle square star left right of above big small".split()
    caps = [" ".join(rng.choice(words, size=rng.integers(1, 12))) for _ in range(60)]
    caps.append(" ".join(["red"] * 70 + ["circle"]))  # longer than 64 tokens: fallback path
    images = [caps[i : i + 5] for i in range(0, 60, 5)] + [caps[-3:]]
    queries = caps[::3] + [caps[-1], ""]
    rel = caption_relevance(queries, images)
    for qi, q in enumerate(queries):
        for ii, refs in enumerate(images):
            ps = []
            rs = []
            qt = q.split()
            for ref in refs:
                lcs = _lcs_length(qt, ref.split())
                ps.append(lcs / len(qt) if qt else 0.0)
                rs.append(lcs / len(ref.split()))
            p, r = max(ps), max(rs)
            expected = 0.0 if p == 0 or r == 0 else (1 + 1.44) * p * r / (r + 1.44 * p)
            assert rel[qi, ii] == pytest.approx(expected, abs=1e-12), (q, refs)


def test_caption_relevance_rejects_bare_strings() -> None:
    with pytest.raises(ValueError):
        caption_relevance("one query", [["x"]])  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        caption_relevance(["q"], ["not a list"])  # type: ignore[list-item]


def _dcg(rels: list[float]) -> float:
    return sum((2**x - 1) / math.log2(i + 2) for i, x in enumerate(rels))


def test_ndcg_hand_computed() -> None:
    relevance = np.array([[0.0, 1.0, 0.5, 0.2]])
    scores = np.array([[4.0, 3.0, 2.0, 1.0]])  # ranks images 0, 1, 2, 3
    expected = _dcg([0.0, 1.0, 0.5, 0.2]) / _dcg([1.0, 0.5, 0.2, 0.0])
    assert ndcg_at_k(scores, relevance, k=25) == pytest.approx(expected)
    # cut at k=2
    expected2 = _dcg([0.0, 1.0]) / _dcg([1.0, 0.5])
    assert ndcg_at_k(scores, relevance, k=2) == pytest.approx(expected2)
    # perfect order scores 1; a query with no relevant image scores 0 and is averaged in
    perfect = relevance.copy()
    assert ndcg_at_k(perfect, relevance) == pytest.approx(1.0)
    both = ndcg_at_k(np.vstack([perfect, scores]), np.vstack([relevance, np.zeros((1, 4))]))
    assert both == pytest.approx(0.5)
    linear = (1 / math.log2(3) + 0.5 / math.log2(4) + 0.2 / math.log2(5)) / (
        1 + 0.5 / math.log2(3) + 0.2 / math.log2(4)
    )
    assert ndcg_at_k(scores, relevance, gains="linear") == pytest.approx(linear)


def test_ndcg_ties_get_the_expected_value_over_tie_orders() -> None:
    relevance = np.array([[1.0, 0.0, 0.0]])
    flat = np.zeros((1, 3))
    # each of the 3 tied positions earns the mean gain 1/3
    assert ndcg_at_k(flat, relevance, k=1) == pytest.approx(1 / 3)
    assert ndcg_at_k(flat, relevance, k=3) == pytest.approx((1 + 1 / math.log2(3) + 0.5) / 3)
    # equals the average over every permutation of the tie
    rel = np.array([[0.9, 0.1, 0.5, 0.0]])
    scores = np.array([[2.0, 1.0, 1.0, 1.0]])  # image 0 first, then a three-way tie
    perms = [[0, *p] for p in itertools.permutations([1, 2, 3])]
    ideal = _dcg(sorted(rel[0], reverse=True)[:3])
    expected = np.mean([_dcg([rel[0, j] for j in p][:3]) / ideal for p in perms])
    assert ndcg_at_k(scores, rel, k=3) == pytest.approx(expected)


def test_ndcg_validates() -> None:
    with pytest.raises(ValueError):
        ndcg_at_k(np.zeros((2, 3)), np.zeros((2, 4)))
    with pytest.raises(ValueError):
        ndcg_at_k(np.zeros((2, 3)), np.zeros((2, 3)), k=0)
    with pytest.raises(ValueError):
        ndcg_at_k(np.zeros((2, 3)), np.zeros((2, 3)), gains="cubic")  # type: ignore[arg-type]
