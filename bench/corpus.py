"""The benchmark's document set: CSR arrays shared by every engine, never Python dicts in bulk.

One image = one row: ``indices[indptr[i]:indptr[i+1]]`` are its vocabulary ids (ascending) and
``weights[...]`` its φ values (> 0). Arrays may be memory-mapped ``.npy`` files so a million images
x 1000 terms (1e9 postings) never has to sit in RAM at once. Ids are ``img0000042``-style so that
"ties broken by id ascending" equals "ties broken by row ascending" for every engine.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from vsparta.termindex.base import TermDocument, TermIndex

ID_WIDTH = 7


def doc_id(row: int) -> str:
    """Zero-padded id: lexicographic order is row order (up to 10M images)."""
    return f"img{row:0{ID_WIDTH}d}"


@dataclass
class Corpus:
    """N images x weighted vocabulary ids, CSR. ``ids`` is None for synthetic rows (see ``doc_id``)."""

    indptr: np.ndarray  # [n_docs + 1] int64
    indices: np.ndarray  # [nnz] uint16 or int32, ascending within a row
    weights: np.ndarray  # [nnz] float32, > 0
    vocab_size: int
    ids: list[str] | None = None
    meta: dict = field(default_factory=dict)

    @property
    def n_docs(self) -> int:
        return len(self.indptr) - 1

    @property
    def nnz(self) -> int:
        return int(self.indptr[-1])

    def id_of(self, row: int) -> str:
        return self.ids[row] if self.ids is not None else doc_id(row)

    def row_of(self, doc: str) -> int:
        """Inverse of ``id_of`` (engines return ids; the oracle speaks rows)."""
        if self.ids is None:
            return int(doc[3:])
        if "_row_by_id" not in self.meta:
            self.meta["_row_by_id"] = {d: i for i, d in enumerate(self.ids)}
        return self.meta["_row_by_id"][doc]

    def head(self, n_docs: int) -> Corpus:
        """The first ``n_docs`` images (synthetic corpora are prefix-consistent, so this is exact)."""
        if n_docs > self.n_docs:
            raise ValueError(f"corpus has {self.n_docs} images, asked for {n_docs}")
        end = int(self.indptr[n_docs])
        meta = {k: v for k, v in self.meta.items() if not k.startswith("_")}
        return Corpus(
            self.indptr[: n_docs + 1],
            self.indices[:end],
            self.weights[:end],
            self.vocab_size,
            None if self.ids is None else self.ids[:n_docs],
            meta | {"n_docs": n_docs},
        )

    def row(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        a, b = int(self.indptr[i]), int(self.indptr[i + 1])
        return self.indices[a:b], self.weights[a:b]

    def arrays(self, start: int, stop: int) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
        """Rows [start, stop) as ``TermIndex.upsert_arrays`` takes them (ids, indptr from 0, term ids,
        weights)."""
        a, b = int(self.indptr[start]), int(self.indptr[stop])
        ids = [self.id_of(i) for i in range(start, stop)]
        indptr = np.asarray(self.indptr[start : stop + 1]) - a
        return ids, indptr, np.asarray(self.indices[a:b]), np.asarray(self.weights[a:b])

    def upsert_into(self, index: TermIndex, chunk: int) -> None:
        """Every row through ``index.upsert_arrays`` (the indexer's path, no object per term),
        ``chunk`` images per call."""
        for start, stop in self.chunks(chunk):
            index.upsert_arrays(*self.arrays(start, stop))

    def chunks(self, size: int = 1000) -> Iterator[tuple[int, int]]:
        """Row ranges [start, stop) of at most ``size`` images, for streaming loaders."""
        for start in range(0, self.n_docs, size):
            yield start, min(start + size, self.n_docs)

    def term_documents(self, start: int = 0, stop: int | None = None) -> Iterator[TermDocument]:
        """Rows as ``TermDocument`` (for our engines' public API); build dicts lazily, per row."""
        stop = self.n_docs if stop is None else stop
        for i in range(start, stop):
            idx, w = self.row(i)
            yield TermDocument(self.id_of(i), dict(zip(idx.tolist(), w.tolist(), strict=True)))

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        np.save(directory / "indptr.npy", np.asarray(self.indptr))
        np.save(directory / "indices.npy", np.asarray(self.indices))
        np.save(directory / "weights.npy", np.asarray(self.weights))
        meta = {k: v for k, v in self.meta.items() if not k.startswith("_")}
        (directory / "meta.json").write_text(json.dumps(meta | {"vocab_size": self.vocab_size}, indent=1))
        if self.ids is not None:
            (directory / "ids.txt").write_text("\n".join(self.ids) + "\n")

    @classmethod
    def load(cls, directory: Path, mmap: bool = True) -> Corpus:
        mode = "r" if mmap else None
        meta = json.loads((directory / "meta.json").read_text())
        ids_file = directory / "ids.txt"
        ids = ids_file.read_text().splitlines() if ids_file.exists() else None
        return cls(
            np.load(directory / "indptr.npy", mmap_mode=mode),
            np.load(directory / "indices.npy", mmap_mode=mode),
            np.load(directory / "weights.npy", mmap_mode=mode),
            int(meta["vocab_size"]),
            ids,
            meta,
        )


Query = dict[int, float]  # vocabulary id -> boost (occurrences in the caption)
