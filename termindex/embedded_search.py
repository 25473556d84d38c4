"""Exact top-k search over the embedded engine's segments (one snapshot).

Candidates come from summing 8-bit quantized upper bounds of log1p(w) in float32 (1 byte per
document for frequent terms, ``embedded_scoring.search_segment``); every document that could
still be in the top k by a proven margin is rescored in float64 (ascending term id, numpy's
log1p, as the oracle does), ties broken by id ascending.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from termindex.base import Hit
from termindex.embedded_format import Segment
from termindex.embedded_scoring import gather_weights, rescore, search_segment
from termindex.embedded_weights import QUANT_STEP, log1p_table, log1p_table64, quant_tables


def search_segments(segments: Sequence[Segment], q: dict[int, float], k: int, explain: bool) -> list[Hit]:
    """Top ``k`` of a validated query ``q`` (term ids checked against the vocabulary)."""
    qterms = np.array(sorted(q), dtype=np.int64)
    boosts = np.array([q[t] for t in qterms], dtype=np.float64)
    boosts32 = boosts.astype(np.float32)
    lut = log1p_table()
    log1p64 = log1p_table64()
    qlut = quant_tables()[0]
    # Candidates come from A = sum of boost * q, q a quantized upper bound of log1p(w) with
    # (q - 1) * STEP <= log1p(w) < q * STEP (kernels.QUANT_STEP). With Q = sum of boosts:
    #   score <= STEP * A_exact + s   and   score >= STEP * (A_exact - Q) - s,
    # so the k-th score is >= STEP * (theta - Q - eps_q) - s when k documents have A >= theta,
    # and a document can only reach it if A >= theta - margin. eps_q and eps_t bound float32
    # error (each product ~3 * 2**-24 relative, the sum m * 2**-24 of the total, doubled);
    # s covers float64 rounding of log1p and of the quantization.
    step = QUANT_STEP
    total = float(boosts.sum())
    m = len(qterms)
    eps_q = (m + 4) * 2.0**-23 * 255.0 * total
    eps_t = (m + 4) * 2.0**-23 * 12.0 * total
    slack = 1e-12 * (1.0 + 12.0 * total)
    margin = np.float32(total + 2 * eps_q + 2 * slack / step + 1e-6)
    kth_floor = np.array([step, step * (total + eps_q) + slack + eps_t], dtype=np.float32)
    theta = np.float32(-np.inf)
    found: list[tuple[int, np.ndarray, np.ndarray]] = []
    for si, seg in enumerate(segments):
        present = qterms < seg.n_terms
        if not seg.n_docs or not present.any():
            continue
        a32, locs, theta = search_segment(
            qterms[present], boosts32[present], *seg.postings, seg.quant, seg.blockmax, lut, qlut,
            seg.deleted, seg.n_docs, seg.n_blocks, seg.block_shift, k, theta, margin, kth_floor,
        )  # fmt: skip
        theta = np.float32(theta)
        if len(locs):
            found.append((si, a32, locs))
    if not found:
        return []
    all_a = np.concatenate([f[1] for f in found])
    if len(all_a) > k:
        cut = np.partition(all_a, len(all_a) - k)[len(all_a) - k] - margin
    else:
        cut = -np.inf
    parts = []  # (segment, local ids, exact scores, weights) of the candidates
    for si, a32, locs in found:
        seg = segments[si]
        locs = locs[a32 >= cut]
        if not len(locs):
            continue
        bits = gather_weights(
            qterms,
            *seg.postings,
            seg.n_terms,
            seg.n_blocks,
            seg.block_shift,
            locs,
        )
        scores = rescore(bits, boosts, log1p64)
        parts.append((si, locs, scores, bits))
    all_scores = np.concatenate([p[2] for p in parts])
    kth_score = -np.inf if len(all_scores) <= k else np.partition(all_scores, len(all_scores) - k)[-k]
    rows: list[tuple[float, str, int, int, np.ndarray]] = []
    for si, locs, scores, bits in parts:  # ids are decoded only for the top k and its ties
        seg = segments[si]
        for r in np.flatnonzero(scores >= kth_score):
            rows.append((float(scores[r]), seg.doc_id(int(locs[r])), si, int(locs[r]), bits[r]))
    rows.sort(key=lambda row: (-row[0], row[1]))
    hits = []
    for score, doc_id, si, local, bits in rows[:k]:
        contributions = None
        if explain:
            weights = bits.view(np.float16).astype(np.float64)
            contributions = {
                int(t): (float(w), float(b * log1p64[wb]))
                for t, b, w, wb in zip(qterms, boosts, weights, bits, strict=True)
                if wb
            }
        hits.append(Hit(id=doc_id, score=score, metadata=segments[si].metadata(local),
                        contributions=contributions))  # fmt: skip
    return hits
