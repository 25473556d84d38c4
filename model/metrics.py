"""Retrieval metrics for text-to-image search: Recall@K, ROUGE-L, TERN's caption relevance, NDCG@K.

numpy only, so evaluation of an index (which needs no model) does not pull in torch.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

import numpy as np

_TOKEN = re.compile(r"[a-z0-9]+")

# coco-caption's ROUGE-L (pycocoevalcap/rouge/rouge.py), used by TERN to build its relevances.
TERN_BETA = 1.2


def recall_at_k(
    scores: np.ndarray, positive: np.ndarray | Sequence[int], ks: Sequence[int] = (1, 5, 10)
) -> dict[str, float]:
    """Percentage of queries whose right image is among the top k, for each k (keys ``"R@k"``).

    ``scores`` is [Q, I] (higher is better), ``positive`` is [Q] (the right image's column).
    Ties are counted pessimistically: every other image scoring exactly as high as the right one
    is ranked above it, so tie-breaking luck can never inflate recall (a constant scorer gets 0
    for every k smaller than the number of images).
    """
    scores = np.asarray(scores, dtype=np.float64)
    positive = np.asarray(positive)
    if scores.ndim != 2:
        raise ValueError(f"scores must be [queries, images], got shape {scores.shape}")
    q, n = scores.shape
    if positive.shape != (q,):
        raise ValueError(f"positive must have shape ({q},), got {positive.shape}")
    if not np.issubdtype(positive.dtype, np.integer):
        raise ValueError("positive must hold integer image indices")
    if q and (positive.min() < 0 or positive.max() >= n):
        raise ValueError(f"positive indices must lie in [0, {n})")
    if np.isnan(scores).any():
        raise ValueError("scores contain NaN")
    if not ks or any(int(k) < 1 for k in ks):
        raise ValueError(f"ks must be positive integers, got {ks!r}")
    if q == 0:
        return {f"R@{int(k)}": 0.0 for k in ks}
    pos_score = scores[np.arange(q), positive][:, None]
    # 0-based rank: every other image at least as good as the right one goes above it
    rank = (scores >= pos_score).sum(axis=1) - 1
    return {f"R@{int(k)}": float(100.0 * np.mean(rank < int(k))) for k in ks}


def _tokens(text: str) -> list[str]:
    """Lowercased alphanumeric word tokens: the same split as the ``rouge_score`` package."""
    return _TOKEN.findall(text.lower())


def _lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    if len(a) < len(b):
        a, b = b, a
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0] * (len(b) + 1)
        for j, y in enumerate(b, 1):
            cur[j] = prev[j - 1] + 1 if x == y else max(prev[j], cur[j - 1])
        prev = cur
    return prev[-1]


def _lcs_precision_recall(candidate: Sequence[str], reference: Sequence[str]) -> tuple[float, float]:
    if not candidate or not reference:
        return 0.0, 0.0
    lcs = _lcs_length(candidate, reference)
    return lcs / len(candidate), lcs / len(reference)


def _f_beta(precision: float, recall: float, beta: float) -> float:
    if precision == 0.0 or recall == 0.0:
        return 0.0
    b2 = beta * beta
    return (1 + b2) * precision * recall / (recall + b2 * precision)


def rouge_l(candidate: str, reference: str, *, beta: float = TERN_BETA) -> float:
    """ROUGE-L F-measure (Lin 2004, section 3.1) on lowercased word tokens.

    P = LCS/|candidate|, R = LCS/|reference|, F = (1+β²)PR / (R + β²P). β defaults to 1.2 as in
    coco-caption, which TERN used; ``beta=1`` gives the ``rouge_score`` package's ``fmeasure``.
    """
    if beta <= 0:
        raise ValueError(f"beta must be positive, got {beta}")
    p, r = _lcs_precision_recall(_tokens(candidate), _tokens(reference))
    return _f_beta(p, r, beta)


def caption_relevance(
    query_captions: Sequence[str], image_captions: Sequence[Sequence[str]], *, beta: float = TERN_BETA
) -> np.ndarray:
    """TERN relevance [Q, I]: how well image i's captions describe query q, by ROUGE-L.

    As TERN computes it (coco-caption's multi-reference ROUGE-L with the query caption as the
    candidate and the image's captions as references): the best precision and the best recall
    over the image's captions are taken separately, then combined with β = 1.2. So the image the
    query was written for scores 1.0 when the query is one of its captions. An image without
    captions has relevance 0.

    A 5K test set means 25K x 25K caption pairs, so the LCS lengths come from a bit-parallel
    algorithm (Allison & Dix 1986) run for all pairs at once with numpy.
    """
    if beta <= 0:
        raise ValueError(f"beta must be positive, got {beta}")
    if isinstance(query_captions, str):
        raise ValueError("query_captions must be a list of strings, not one string")
    for caps in image_captions:
        if isinstance(caps, str):
            raise ValueError("image_captions must be a list of caption lists, one list per image")
    n_img = len(image_captions)
    per_image = max((len(c) for c in image_captions), default=0)
    out = np.zeros((len(query_captions), n_img), dtype=np.float64)
    if not len(query_captions) or n_img == 0 or per_image == 0:
        return out
    vocab: dict[str, int] = {}

    def ids(text: str) -> list[int]:
        return [vocab.setdefault(t, len(vocab) + 1) for t in _tokens(text)]  # 0 = padding

    # references padded to `per_image` slots per image; an empty slot has length 0
    ref_lists = [ids(c) for caps in image_captions for c in (*caps, *[""] * (per_image - len(caps)))]
    q_lists = [ids(c) for c in query_captions]
    ref_len = np.array([len(r) for r in ref_lists], dtype=np.float64)
    refs = np.zeros((len(ref_lists), max(1, int(ref_len.max()))), dtype=np.int64)
    for i, r in enumerate(ref_lists):
        refs[i, : len(r)] = r
    q_len = np.array([len(q) for q in q_lists], dtype=np.float64)
    lcs = np.zeros((len(q_lists), len(ref_lists)), dtype=np.float64)
    short = [i for i, q in enumerate(q_lists) if 0 < len(q) <= 64]
    for start in range(0, len(short), 256):
        chunk = short[start : start + 256]
        lcs[chunk] = _bit_parallel_lcs([q_lists[i] for i in chunk], refs, len(vocab) + 1)
    for i, q in enumerate(q_lists):  # rare: queries longer than one machine word
        if len(q) > 64:
            lcs[i] = [_lcs_length(q, r) for r in ref_lists]
    with np.errstate(divide="ignore", invalid="ignore"):
        prec = np.where(q_len[:, None] > 0, lcs / q_len[:, None], 0.0)
        rec = np.where(ref_len[None, :] > 0, lcs / ref_len[None, :], 0.0)
    best_p = prec.reshape(len(q_lists), n_img, per_image).max(axis=2)
    best_r = rec.reshape(len(q_lists), n_img, per_image).max(axis=2)
    b2 = beta * beta
    denom = best_r + b2 * best_p
    np.divide((1 + b2) * best_p * best_r, denom, out=out, where=(best_p > 0) & (best_r > 0))
    return out


def _bit_parallel_lcs(queries: list[list[int]], refs: np.ndarray, vocab_size: int) -> np.ndarray:
    """LCS lengths [len(queries), len(refs)] for queries of at most 64 tokens; refs padded with 0.

    Allison-Dix: V starts all ones; for each reference token with match mask M (bit i set where
    query[i] equals it), U = V & M, V = (V + U) | (V - U). The LCS is the number of zero bits of V
    among the query's bits. Padding tokens have an empty mask and leave V unchanged.
    """
    masks = np.zeros((len(queries), vocab_size), dtype=np.uint64)
    for qi, q in enumerate(queries):
        for bit, tok in enumerate(q):
            masks[qi, tok] |= np.uint64(1) << np.uint64(bit)
    v = np.full((len(queries), refs.shape[0]), np.iinfo(np.uint64).max, dtype=np.uint64)
    for j in range(refs.shape[1]):
        u = v & masks[:, refs[:, j]]
        v = (v + u) | (v - u)
    lengths = np.array([len(q) for q in queries], dtype=np.uint64)
    ones = np.iinfo(np.uint64).max
    low = np.where(lengths == 64, ones, (np.uint64(1) << np.minimum(lengths, 63)) - np.uint64(1))
    return _popcount(~v & low[:, None]).astype(np.float64)


def _popcount(x: np.ndarray) -> np.ndarray:
    if hasattr(np, "bitwise_count"):  # numpy >= 2
        return np.bitwise_count(x)
    table = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)
    return table[x[..., None].view(np.uint8)].sum(axis=-1)


def ndcg_at_k(
    scores: np.ndarray,
    relevance: np.ndarray,
    k: int = 25,
    *,
    gains: Literal["exponential", "linear"] = "exponential",
) -> float:
    """Mean NDCG@k over queries, in [0, 1], as TERN computes it.

    Gain 2^rel − 1 (TERN's default; ``gains="linear"`` uses rel), discount log2(rank + 1) with
    rank from 1, normalised by the DCG of the ideal order; a query with no relevant image scores
    0. Tied scores get the expected DCG over all orders of the tie (McSherry & Najork 2008):
    each tied position earns the group's mean gain. With ROUGE-L relevance every image has some
    relevance, so an arbitrary tie order would swing NDCG; this way a constant scorer gets
    exactly the random-ranking value, not better or worse by luck of ``argsort``.
    """
    scores = np.asarray(scores, dtype=np.float64)
    relevance = np.asarray(relevance, dtype=np.float64)
    if scores.ndim != 2 or scores.shape != relevance.shape:
        raise ValueError(f"scores {scores.shape} and relevance {relevance.shape} must both be [Q, I]")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if gains not in ("exponential", "linear"):
        raise ValueError(f"gains must be 'exponential' or 'linear', got {gains!r}")
    if np.isnan(scores).any() or np.isnan(relevance).any():
        raise ValueError("scores or relevance contain NaN")
    q, n = scores.shape
    if q == 0 or n == 0:
        return 0.0
    kk = min(k, n)
    gain = np.exp2(relevance) - 1.0 if gains == "exponential" else relevance
    discount = 1.0 / np.log2(np.arange(2, kk + 2))
    dcg = np.empty(q)
    for i in range(q):
        order = np.argsort(-scores[i], kind="stable")
        ranked = scores[i, order]
        group = np.concatenate([[0], np.cumsum(ranked[1:] != ranked[:-1])])  # tie-group id per rank
        mean_gain = np.bincount(group, weights=gain[i, order]) / np.bincount(group)
        dcg[i] = (mean_gain[group[:kk]] * discount).sum()
    ideal = (-np.sort(-gain, axis=1)[:, :kk] * discount).sum(axis=1)
    ndcg = np.divide(dcg, ideal, out=np.zeros_like(dcg), where=ideal > 0)
    return float(ndcg.mean())
