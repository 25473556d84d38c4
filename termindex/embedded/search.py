"""Exact top-k search over the embedded engine's segments (one snapshot).

Candidates come from summing 8-bit quantized upper bounds of saturate(w) in float32 (1 byte per
document for frequent terms, ``embedded.scoring.search_segment``); every document that could
still be in the top k by a proven margin is rescored in float64 (ascending term id, numpy's
saturate_array, as the oracle does), ties broken by id ascending.

The bounds. A segment quantizes with its own step S: q = floor(saturate(w) / S) + 1, so
(q - 1) * S <= saturate(w) < q * S. With A = sum of boost * q over the query's terms and
Q = sum of boosts:

    S * (A - Q) - s  <=  score  <=  S * A + s

where s covers float64 rounding of saturate and of the quantization. A is summed in float32: eps_q
bounds its error (each product ~3 * 2**-24 relative, the sum m * 2**-24 of the total, doubled),
eps_t that of the float32 block upper bounds. The k-th best lower bound seen so far is carried
across segments as a score (each segment converts it to its own A units), and a candidate is
rescored only if its upper bound reaches the k-th best lower bound of all candidates.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from vsparta.termindex.base import Hit
from vsparta.termindex.embedded.format import Segment
from vsparta.termindex.embedded.scoring import (
    bound_range,
    gather_weights,
    rescore,
    search_one_segment,
    search_segment,
)
from vsparta.termindex.embedded.weights import quant_tables, saturation_table, saturation_table64


class _Query:
    """The query's arrays and error terms, computed once for all segments."""

    __slots__ = ("boosts", "boosts32", "eps_q", "eps_t", "qterms", "slack", "total")

    def __init__(self, q: dict[int, float]) -> None:
        terms = sorted(q)
        self.qterms = np.array(terms, dtype=np.int64)
        self.boosts = np.array([q[t] for t in terms], dtype=np.float64)
        self.boosts32 = self.boosts.astype(np.float32)
        self.total = total = math.fsum(q.values())
        m = len(terms)
        self.eps_q = (m + 4) * 2.0**-23 * 255.0 * total
        self.eps_t = (m + 4) * 2.0**-23 * 12.0 * total
        self.slack = 1e-12 * (1.0 + 12.0 * total)

    def segment_params(self, step: float) -> tuple[np.float32, np.ndarray, np.ndarray]:
        """(margin in A units, [step, slack] for block skipping, bounds for ``bound_range``)."""
        margin = np.float32(self.total + 2 * self.eps_q + 2 * self.slack / step + 1e-6)
        step_slack = np.array(
            [step, step * (self.total + self.eps_q) + self.slack + self.eps_t], dtype=np.float32
        )
        bounds = np.array([step, self.total + self.eps_q, self.eps_q, self.slack], dtype=np.float64)
        return margin, step_slack, bounds

    def theta_for(self, kth_lower: float, step: float) -> np.float32:
        """A threshold in a segment's A units that no more than ``kth_lower`` implies (rounded down)."""
        if kth_lower == -math.inf:
            return np.float32(-np.inf)
        theta = (kth_lower + self.slack) / step + self.total + self.eps_q
        return np.float32(theta - 1e-6 * (1.0 + abs(theta)))

    def lower_of(self, theta: float, step: float) -> float:
        """The k-th score lower bound that k documents with A >= ``theta`` prove."""
        if theta == -math.inf:
            return -math.inf
        return step * (float(theta) - self.total - self.eps_q) - self.slack


def search_segments(segments: Sequence[Segment], q: dict[int, float], k: int, explain: bool) -> list[Hit]:
    """Top ``k`` of a validated query ``q`` (term ids checked against the vocabulary)."""
    query = _Query(q)
    lut = saturation_table()
    sat64 = saturation_table64()
    live = [si for si, seg in enumerate(segments) if seg.n_docs]
    if len(live) == 1:
        si = live[0]
        seg = segments[si]
        margin, step_slack, bounds = query.segment_params(seg.quant_step)
        locs, scores, bits = search_one_segment(
            query.qterms, query.boosts32, query.boosts, *seg.postings, seg.quant, seg.blockmax, lut,
            quant_tables(seg.quant_step), sat64, seg.deleted, seg.n_docs, seg.n_terms, seg.n_blocks,
            seg.block_shift, k, margin, step_slack, bounds,
        )  # fmt: skip
        parts = [(si, locs, scores, bits)]
    else:
        parts = _search_many(segments, live, query, k, lut, sat64)
    rows: list[tuple[float, str, int, int, int]] = []  # score, id, part, local id, row in part
    for p, (si, locs, scores, _) in enumerate(parts):  # ids are decoded only for the top k and ties
        doc_id = segments[si].doc_id
        for r, (local, score) in enumerate(zip(locs.tolist(), scores.tolist(), strict=True)):
            rows.append((score, doc_id(local), p, local, r))
    rows.sort(key=lambda row: (-row[0], row[1]))
    hits = []
    for score, doc_id, p, local, r in rows[:k]:
        si = parts[p][0]
        contributions = None
        if explain:
            wbits = parts[p][3][r]
            weights = wbits.view(np.float16).astype(np.float64)
            contributions = {
                int(t): (float(w), float(b * sat64[wb]))
                for t, b, w, wb in zip(query.qterms, query.boosts, weights, wbits, strict=True)
                if wb
            }
        hits.append(Hit(id=doc_id, score=score, metadata=segments[si].metadata(local),
                        contributions=contributions))  # fmt: skip
    return hits


def _search_many(
    segments: Sequence[Segment], live: list[int], query: _Query, k: int, lut: np.ndarray, sat64: np.ndarray
) -> list[tuple[int, np.ndarray, np.ndarray, np.ndarray]]:
    """Several segments: candidates of each (the k-th lower bound carried along as a score), one
    cut over all of them, then exact rescoring; returns each segment's top rows."""
    kth_lower = -math.inf
    found: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]] = []  # (segment, locals, lo, hi)
    for si in live:
        seg = segments[si]
        present = query.qterms < seg.n_terms
        if not present.any():
            continue
        step = seg.quant_step
        margin, step_slack, bounds = query.segment_params(step)
        a32, locs, theta = search_segment(
            query.qterms[present], query.boosts32[present], *seg.postings, seg.quant, seg.blockmax, lut,
            quant_tables(step), seg.deleted, seg.n_docs, seg.n_blocks, seg.block_shift, k,
            query.theta_for(kth_lower, step), margin, step_slack,
        )  # fmt: skip
        kth_lower = max(kth_lower, query.lower_of(theta, step))
        if len(locs):
            lo, hi = bound_range(a32, bounds)
            found.append((si, locs, lo, hi))
    if not found:
        return []
    all_lo = np.concatenate([f[2] for f in found])
    cut = np.partition(all_lo, len(all_lo) - k)[len(all_lo) - k] if len(all_lo) > k else -np.inf
    scored = []
    for si, locs, _, hi in found:
        seg = segments[si]
        locs = locs[hi >= cut]
        if not len(locs):
            continue
        bits = gather_weights(query.qterms, *seg.postings, seg.n_terms, seg.n_blocks, seg.block_shift, locs)
        scored.append((si, locs, rescore(bits, query.boosts, sat64), bits))
    all_scores = np.concatenate([p[2] for p in scored])
    kth = (
        np.partition(all_scores, len(all_scores) - k)[len(all_scores) - k] if len(all_scores) > k else -np.inf
    )
    return [(si, locs[s >= kth], s[s >= kth], b[s >= kth]) for si, locs, s, b in scored]
