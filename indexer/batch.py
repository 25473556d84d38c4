"""A batch of term documents as CSR arrays: what flows from the encoder to the engines and the export.

One image's terms are ``term_ids/weights[indptr[i]:indptr[i+1]]``, heaviest first, ties by id:
no Python object per term between the device and the engine (``TermIndex.upsert_arrays``).
Torch-free, so the writer thread and tests need no model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from vsparta.termindex import TermDocument
from vsparta.termindex.base import heaviest_terms

Csr = tuple[np.ndarray, np.ndarray, np.ndarray]  # (indptr int64 [n+1], term_ids int32, weights float32)


def canonical_csr(
    indptr: np.ndarray, term_ids: np.ndarray, weights: np.ndarray, top_n: int | None, min_weight: float = 0.0
) -> Csr:
    """Positive finite weights only, each row heaviest first (ties by id), at most ``top_n`` per row,
    and none lighter than ``min_weight`` except a row's heaviest (an image stays findable).

    The array form of ``vsparta.termindex.base.heaviest_terms`` (a test checks they agree row by row).
    The encoder's top-k output is already in this order; then this costs a few vector passes
    and no sort.
    """
    indptr = np.asarray(indptr, dtype=np.int64)
    term_ids = np.asarray(term_ids).astype(np.int32, copy=False)
    weights = np.asarray(weights).astype(np.float32, copy=False)
    rows = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    keep = np.isfinite(weights) & (weights > 0)
    if not keep.all():
        rows, term_ids, weights = rows[keep], term_ids[keep], weights[keep]
    if len(weights) > 1:
        same_row = rows[1:] == rows[:-1]
        lighter_first = (weights[1:] > weights[:-1]) | (
            (weights[1:] == weights[:-1]) & (term_ids[1:] < term_ids[:-1])
        )
        if np.any(same_row & lighter_first):
            order = np.lexsort((term_ids, -weights, rows))
            rows, term_ids, weights = rows[order], term_ids[order], weights[order]
    counts = np.bincount(rows, minlength=len(indptr) - 1).astype(np.int64)
    limit = len(weights) if top_n is None else top_n
    light = min_weight > 0 and bool(len(weights)) and bool(weights.min() < min_weight)
    if len(rows) and (counts.max() > limit or light):
        starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
        rank = np.arange(len(rows)) - starts[rows]
        cut = (rank < limit) & ((weights >= min_weight) | (rank == 0))
        rows, term_ids, weights = rows[cut], term_ids[cut], weights[cut]
        counts = np.bincount(rows, minlength=len(indptr) - 1).astype(np.int64)
    out_indptr = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=out_indptr[1:])
    return out_indptr, term_ids, weights


def csr_from_dicts(terms: Sequence[Mapping[int, float]]) -> Csr:
    """Per-image ``{vocab id: weight}`` (term-document input, test encoders) -> canonical CSR."""
    rows = [heaviest_terms(t) for t in terms]
    indptr = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum([len(r) for r in rows], out=indptr[1:])
    ids = np.fromiter((i for r in rows for i, _ in r), dtype=np.int32, count=int(indptr[-1]))
    weights = np.fromiter((w for r in rows for _, w in r), dtype=np.float32, count=int(indptr[-1]))
    return indptr, ids, weights


@dataclass
class TermBatch:
    """Documents ``ids[i]`` with terms in CSR rows and their metadata; rows are canonical."""

    ids: list[str]
    indptr: np.ndarray
    term_ids: np.ndarray
    weights: np.ndarray
    metadata: list[Mapping[str, Any]]

    def __len__(self) -> int:
        return len(self.ids)

    def row(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        a, b = int(self.indptr[i]), int(self.indptr[i + 1])
        return self.term_ids[a:b], self.weights[a:b]

    @classmethod
    def concat(cls, batches: Sequence[TermBatch]) -> TermBatch:
        """One batch out of several (the writer's commit unit): arrays joined, offsets shifted."""
        if len(batches) == 1:
            return batches[0]
        offsets = np.cumsum([0] + [int(b.indptr[-1]) for b in batches[:-1]])
        indptr = np.concatenate([[0]] + [b.indptr[1:] + off for b, off in zip(batches, offsets, strict=True)])
        return cls(
            ids=[i for b in batches for i in b.ids],
            indptr=indptr.astype(np.int64),
            term_ids=np.concatenate([b.term_ids for b in batches]),
            weights=np.concatenate([b.weights for b in batches]),
            metadata=[m for b in batches for m in b.metadata],
        )

    def documents(self) -> list[TermDocument]:
        """As ``TermDocument`` objects (tests, small jobs; never the hot path)."""
        out = []
        for i, doc_id in enumerate(self.ids):
            ids, weights = self.row(i)
            out.append(
                TermDocument(doc_id, dict(zip(ids.tolist(), weights.tolist(), strict=True)), self.metadata[i])
            )
        return out
