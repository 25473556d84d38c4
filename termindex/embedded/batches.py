"""Validating writes for the embedded engine: documents or CSR arrays into one batch of arrays.

Everything is checked before anything is written, so a bad document rejects its whole batch
with ``InvalidDocument`` and the index is unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from vsparta.termindex.base import TermDocument, validate_document_weights, validate_id
from vsparta.termindex.embedded.build import first_repeated_term_row
from vsparta.termindex.errors import InvalidDocument


@dataclass(frozen=True)
class Batch:
    """Validated documents in document order: ``lens[i]`` postings each in ``terms``/``weights``."""

    ids: list[str]
    lens: np.ndarray
    terms: np.ndarray
    weights: np.ndarray
    metadata_json: list[bytes]


def batch_from_documents(docs: Iterable[TermDocument], vocab: int | None) -> Batch | None:
    """Validate documents into one batch (None when empty); a later copy of an id wins."""
    batch: dict[str, TermDocument] = {}
    for doc in docs:
        if not isinstance(doc, TermDocument):
            raise InvalidDocument(f"expected TermDocument, got {type(doc).__name__}")
        validate_id(doc.id)
        terms = validate_document_weights(doc.weights, what=f"document {doc.id!r}")
        if vocab is not None and terms and max(terms) >= vocab:
            raise InvalidDocument(f"document {doc.id!r}: term id {max(terms)} >= vocab_size {vocab}")
        if not isinstance(doc.metadata, Mapping):
            raise InvalidDocument(f"document {doc.id!r}: metadata must be a mapping")
        batch.pop(doc.id, None)  # a later copy in the batch wins, and keeps its position
        batch[doc.id] = TermDocument(doc.id, terms, doc.metadata)
    if not batch:
        return None
    ids = list(batch)
    lens = np.array([len(d.weights) for d in batch.values()], dtype=np.int64)
    total = int(lens.sum())
    terms = np.empty(total, dtype=np.int64)
    weights = np.empty(total, dtype=np.float64)
    pos = 0
    metadata = []
    for d in batch.values():
        n = len(d.weights)
        terms[pos : pos + n] = np.fromiter(d.weights.keys(), dtype=np.int64, count=n)
        weights[pos : pos + n] = np.fromiter(d.weights.values(), dtype=np.float64, count=n)
        pos += n
        try:
            metadata.append(json.dumps(dict(d.metadata), ensure_ascii=False).encode("utf-8"))
        except (TypeError, ValueError) as exc:
            raise InvalidDocument(f"document {d.id!r}: metadata is not JSON-serializable: {exc}") from None
    return Batch(ids, lens, terms, weights, metadata)


def batch_from_arrays(
    ids: Sequence[str],
    indptr: np.ndarray,
    term_ids: np.ndarray,
    weights: np.ndarray,
    metadata: Sequence[Mapping[str, Any]] | None,
    vocab: int | None,
) -> Batch | None:
    """Validate CSR arrays into one batch (None when empty): vectorized, no Python object per
    term. Same rules as ``batch_from_documents``; a repeated id keeps its last row."""
    ids = list(ids)
    indptr = np.asarray(indptr, dtype=np.int64)
    term_ids = np.asarray(term_ids)
    weights = np.asarray(weights, dtype=np.float64)
    if indptr.shape != (len(ids) + 1,) or indptr[0] != 0 or np.any(np.diff(indptr) < 0):
        raise InvalidDocument("indptr must be non-decreasing, start at 0 and have len(ids) + 1 entries")
    if term_ids.shape != weights.shape or term_ids.shape != (int(indptr[-1]),):
        raise InvalidDocument("term_ids and weights must both have indptr[-1] entries")
    if metadata is not None and len(metadata) != len(ids):
        raise InvalidDocument("metadata must have one mapping per id")
    for i in ids:
        validate_id(i)
    if len(term_ids) and (not np.issubdtype(term_ids.dtype, np.integer) or term_ids.min() < 0):
        raise InvalidDocument("term ids must be non-negative integers")
    term_ids = term_ids.astype(np.int64)
    if not np.all(np.isfinite(weights) & (weights > 0)):
        raise InvalidDocument("every weight must be finite and > 0")
    if vocab is not None and len(term_ids) and term_ids.max() >= vocab:
        raise InvalidDocument(f"term id {int(term_ids.max())} >= vocab_size {vocab}")
    lens = np.diff(indptr)
    rows = np.repeat(np.arange(len(ids), dtype=np.int64), lens)
    if len(term_ids) and (bad := first_repeated_term_row(indptr, term_ids, int(term_ids.max()) + 1)) >= 0:
        raise InvalidDocument(f"document {ids[bad]!r} lists the same term id twice")
    last = {doc_id: n for n, doc_id in enumerate(ids)}
    if len(last) < len(ids):  # repeated ids: keep each one's last row
        keep = np.array(sorted(last.values()), dtype=np.int64)
        mask = np.zeros(len(ids), dtype=bool)
        mask[keep] = True
        ids = [ids[i] for i in keep]
        metadata = [metadata[i] for i in keep] if metadata is not None else None
        term_ids, weights, lens = term_ids[mask[rows]], weights[mask[rows]], lens[keep]
    meta_json = []
    for n, meta in enumerate(metadata if metadata is not None else [{}] * len(ids)):
        try:
            meta_json.append(json.dumps(dict(meta), ensure_ascii=False).encode("utf-8"))
        except (TypeError, ValueError) as exc:
            raise InvalidDocument(f"document {ids[n]!r}: metadata is not JSON-serializable: {exc}") from None
    if not ids:
        return None
    return Batch(ids, lens, term_ids, weights, meta_json)
