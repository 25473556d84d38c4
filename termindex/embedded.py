"""The embedded engine: weighted-term documents in a directory, memory-mapped, no server.

Design (format details in ``embedded_format``):

- Log-structured: every write adds an immutable segment and/or tombstone files, then switches
  ``manifest.json`` with ``os.replace``. A crash at any point leaves the previous manifest, and
  so the last good state, readable; the dead writer's temp files are removed by the next writer.
- Writers serialize on ``fcntl.flock`` of ``write.lock`` (held per write, not per object), and
  re-read the manifest under the lock, so writers in several processes interleave safely.
- Readers hold an immutable snapshot (manifest + mapped segments). With ``auto_refresh`` (the
  default) each call ``stat``s the manifest (one syscall) and reloads only when it changed.
- Weights are stored as half floats (``oracle.round_like_embedded``); scores are exact for the
  stored weights. Candidates come from summing 8-bit quantized upper bounds of log1p(w) in
  float32 (1 byte per document for frequent terms); every document that could still be in the
  top k by a proven margin is rescored in float64 (ascending term id, ``numpy.log1p``, as the
  oracle does), ties broken by id ascending. Call ``warmup()`` at service start: the kernels
  compile on first use (cached on disk by numba afterwards).
- ``get`` rebuilds a document's terms from the postings (no forward index: keeps 4 bytes per
  stored term), so it returns the stored, rounded weights.
"""

from __future__ import annotations

import fcntl
import json
import logging
import math
import os
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from termindex import embedded_format as fmt
from termindex import embedded_kernels as kern
from termindex.base import Hit, TermDocument, TermIndex, validate_id, validate_weights
from termindex.errors import DocumentNotFound, IndexNotFound, InvalidQuery, TermIndexError
from termindex.oracle import round_like_embedded

log = logging.getLogger(__name__)

MAX_K = 10_000  # like Elasticsearch's index.max_result_window
DEFAULT_BLOCK_SIZE = 65_536


@dataclass(frozen=True)
class _Snapshot:
    """One manifest generation and its mapped segments; never mutated, swapped whole."""

    manifest: dict[str, Any]
    stat_key: tuple[int, int, int]
    segments: tuple[fmt.Segment, ...]

    @property
    def generation(self) -> int:
        return int(self.manifest["generation"])


def _stat_key(root: Path) -> tuple[int, int, int]:
    st = os.stat(root / fmt.MANIFEST)
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def _check_k(k: Any) -> int:
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or not 1 <= k <= MAX_K:
        raise InvalidQuery(f"k must be an integer in [1, {MAX_K}], got {k!r}")
    return int(k)


class EmbeddedIndex(TermIndex):
    """Files-on-disk engine. ``EmbeddedIndex(path, create=True)`` creates the directory if needed.

    Options: ``vocab_size`` (reject term ids >= it in documents and queries; stored in the
    manifest at creation), ``block_size`` (documents per postings block, a power of two
    <= 65536; small values only for tests), ``max_segments`` (merge the smallest segments
    when there are more), ``auto_refresh`` (see new commits on every call; otherwise call
    ``refresh()``), ``lock_timeout`` (seconds to wait for another writer; None waits forever).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        create: bool = False,
        *,
        vocab_size: int | None = None,
        block_size: int = DEFAULT_BLOCK_SIZE,
        max_segments: int = 8,
        auto_refresh: bool = True,
        lock_timeout: float | None = None,
    ) -> None:
        if block_size < 1 or block_size > DEFAULT_BLOCK_SIZE or block_size & (block_size - 1):
            raise ValueError(f"block_size must be a power of two <= 65536, got {block_size}")
        if vocab_size is not None and (isinstance(vocab_size, bool) or int(vocab_size) < 1):
            raise ValueError(f"vocab_size must be a positive integer or None, got {vocab_size!r}")
        if max_segments < 1:
            raise ValueError(f"max_segments must be >= 1, got {max_segments}")
        self.root = Path(path)
        self.max_segments = int(max_segments)
        self.auto_refresh = auto_refresh
        self.lock_timeout = lock_timeout
        self._mutex = threading.Lock()
        self._cache: dict[str, fmt.Segment] = {}
        if not (self.root / fmt.MANIFEST).exists():
            if not create:
                raise IndexNotFound(f"no embedded index at {self.root} (`vsparta index` builds one)")
            self.root.mkdir(parents=True, exist_ok=True)
            with self._write_lock():
                if not (self.root / fmt.MANIFEST).exists():
                    fmt.write_manifest(self.root, fmt.new_manifest(block_size, vocab_size))
        self._snap = self._load()
        stored_vocab = self._snap.manifest.get("vocab_size")
        if vocab_size is not None and stored_vocab is not None and int(vocab_size) != stored_vocab:
            raise ValueError(f"index at {self.root} has vocab_size {stored_vocab}, not {vocab_size}")

    # ------------------------------------------------------------------ snapshots

    def _load(self) -> _Snapshot:
        """Read the current manifest and map its segments (retry if a writer removed files)."""
        for attempt in range(20):
            try:
                key = _stat_key(self.root)
                manifest = fmt.read_manifest(self.root)
                segments = []
                for entry in manifest["segments"]:
                    seg = self._cache.get(entry["name"]) or fmt.Segment.open(self.root, entry["name"])
                    segments.append(seg.with_deletes(entry.get("deletes")))
                self._cache = {s.name: s for s in segments}
                return _Snapshot(manifest, key, tuple(segments))
            except FileNotFoundError:
                if not (self.root / fmt.MANIFEST).exists():
                    raise IndexNotFound(f"no embedded index at {self.root}") from None
                time.sleep(0.005 * (attempt + 1))  # a writer replaced the manifest meanwhile
        raise TermIndexError(f"could not read a consistent state of {self.root}")

    def refresh(self) -> bool:
        """Pick up the latest committed generation; True if it changed. Costs one stat otherwise."""
        with self._mutex:
            if _stat_key(self.root) == self._snap.stat_key:
                return False
            self._snap = self._load()
            return True

    def _snapshot(self) -> _Snapshot:
        if self.auto_refresh:
            try:
                self.refresh()
            except FileNotFoundError:
                raise IndexNotFound(f"embedded index at {self.root} was removed") from None
        return self._snap

    @property
    def generation(self) -> int:
        """The manifest generation this object currently reads."""
        return self._snap.generation

    @property
    def vocab_size(self) -> int | None:
        return self._snap.manifest.get("vocab_size")

    def segment_count(self) -> int:
        return len(self._snapshot().segments)

    # ------------------------------------------------------------------ reads

    def count(self) -> int:
        snap = self._snapshot()
        return sum(s["n_docs"] - s.get("n_deleted", 0) for s in snap.manifest["segments"])

    def _locate(self, snap: _Snapshot, doc_id: str) -> tuple[fmt.Segment, int] | None:
        h = np.array([fmt.id_hash(doc_id)], dtype=np.uint64)
        for seg in reversed(snap.segments):
            local = int(seg.lookup([doc_id], h)[0])
            if local >= 0 and not seg.deleted[local]:
                return seg, local
        return None

    def existing_ids(self, ids: Iterable[str]) -> set[str]:
        """Id lookups in one snapshot; no document is rebuilt."""
        snap = self._snapshot()
        return {doc_id for doc_id in ids if self._locate(snap, validate_id(doc_id)) is not None}

    def get(self, doc_id: str) -> TermDocument:
        validate_id(doc_id)
        snap = self._snapshot()
        found = self._locate(snap, doc_id)
        if found is None:
            raise DocumentNotFound(doc_id)
        seg, local = found
        terms, bits = seg.terms_of(local)
        weights = bits.view(np.float16).astype(np.float64)
        return TermDocument(
            id=doc_id,
            terms={int(t): float(w) for t, w in zip(terms, weights, strict=True)},
            metadata=seg.metadata(local),
        )

    def warmup(self) -> None:
        """Compile (or load from numba's cache) the query kernels and touch the index once, so a
        service's first real query does not pay for it. Call at startup."""
        snap = self._snapshot()
        for seg in snap.segments:
            if seg.n_terms and len(seg.termmax):
                term = int(np.argmax(seg.termmax))
                self.search({term: 1.0}, k=1)
                return

    def iter_documents(self) -> Iterator[TermDocument]:
        """Every live document (slow: rebuilds terms from postings; for export and tests)."""
        snap = self._snapshot()
        for seg in snap.segments:
            for local in seg.live_locals():
                terms, bits = seg.terms_of(int(local))
                weights = bits.view(np.float16).astype(np.float64)
                yield TermDocument(
                    id=seg.doc_id(int(local)),
                    terms={int(t): float(w) for t, w in zip(terms, weights, strict=True)},
                    metadata=seg.metadata(int(local)),
                )

    def search(self, query: Mapping[int, float], k: int = 10, explain: bool = False) -> list[Hit]:
        k = _check_k(k)
        q = validate_weights(query, what="query")
        snap = self._snapshot()
        vocab = snap.manifest.get("vocab_size")
        if vocab is not None and max(q) >= vocab:
            raise InvalidQuery(f"query term id {max(q)} is outside the vocabulary (size {vocab})")
        qterms = np.array(sorted(q), dtype=np.int64)
        boosts = np.array([q[t] for t in qterms], dtype=np.float64)
        boosts32 = boosts.astype(np.float32)
        lut = kern.log1p_table()
        log1p64 = kern.log1p_table64()
        qlut = kern.quant_tables()[0]
        # Candidates come from A = sum of boost * q, q a quantized upper bound of log1p(w) with
        # (q - 1) * STEP <= log1p(w) < q * STEP (kernels.QUANT_STEP). With Q = sum of boosts:
        #   score <= STEP * A_exact + s   and   score >= STEP * (A_exact - Q) - s,
        # so the k-th score is >= STEP * (theta - Q - eps_q) - s when k documents have A >= theta,
        # and a document can only reach it if A >= theta - margin. eps_q and eps_t bound float32
        # error (each product ~3 * 2**-24 relative, the sum m * 2**-24 of the total, doubled);
        # s covers float64 rounding of log1p and of the quantization.
        step = kern.QUANT_STEP
        total = float(boosts.sum())
        m = len(qterms)
        eps_q = (m + 4) * 2.0**-23 * 255.0 * total
        eps_t = (m + 4) * 2.0**-23 * 12.0 * total
        slack = 1e-12 * (1.0 + 12.0 * total)
        margin = np.float32(total + 2 * eps_q + 2 * slack / step + 1e-6)
        kth_floor = np.array([step, step * (total + eps_q) + slack + eps_t], dtype=np.float32)
        theta = np.float32(-np.inf)
        found: list[tuple[int, np.ndarray, np.ndarray]] = []
        for si, seg in enumerate(snap.segments):
            present = qterms < seg.n_terms
            if not seg.n_docs or not present.any():
                continue
            a32, locs, theta = kern.search_segment(
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
            seg = snap.segments[si]
            locs = locs[a32 >= cut]
            if not len(locs):
                continue
            bits = kern.gather_weights(
                qterms,
                *seg.postings,
                seg.n_terms,
                seg.n_blocks,
                seg.block_shift,
                locs,
            )
            scores = kern.rescore(bits, boosts, log1p64)
            parts.append((si, locs, scores, bits))
        all_scores = np.concatenate([p[2] for p in parts])
        kth_score = -np.inf if len(all_scores) <= k else np.partition(all_scores, len(all_scores) - k)[-k]
        rows: list[tuple[float, str, int, int, np.ndarray]] = []
        for si, locs, scores, bits in parts:  # ids are decoded only for the top k and its ties
            seg = snap.segments[si]
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
            hits.append(Hit(id=doc_id, score=score, metadata=snap.segments[si].metadata(local),
                            contributions=contributions))  # fmt: skip
        return hits

    # ------------------------------------------------------------------ writes

    @contextmanager
    def _write_lock(self) -> Iterator[None]:
        fd = os.open(self.root / fmt.LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if self.lock_timeout is None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            else:
                deadline = time.monotonic() + self.lock_timeout
                while True:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        if time.monotonic() > deadline:
                            raise TermIndexError(f"another writer holds {self.root / fmt.LOCK}") from None
                        time.sleep(0.01)
            yield
        finally:
            os.close(fd)  # releases the flock

    @contextmanager
    def _writing(self) -> Iterator[dict[str, Any]]:
        """Lock, start from the latest manifest, clean up dead writers' leftovers."""
        with self._write_lock():
            manifest = fmt.read_manifest(self.root)
            fmt.remove_unreferenced(self.root, manifest)
            yield manifest

    def _commit(self, manifest: dict[str, Any], segments: list[fmt.Segment]) -> None:
        manifest["generation"] = int(manifest["generation"]) + 1
        manifest["segments"] = [
            {"name": s.name, "n_docs": s.n_docs, "n_deleted": int(s.deleted.sum()), "deletes": s.deletes_file}
            for s in segments
            if int(s.deleted.sum()) < s.n_docs
        ]
        fmt.write_manifest(self.root, manifest)
        fmt.remove_unreferenced(self.root, manifest)
        with self._mutex:
            self._snap = self._load()

    def _open_segments(self, manifest: dict[str, Any]) -> list[fmt.Segment]:
        out = []
        for entry in manifest["segments"]:
            seg = self._cache.get(entry["name"]) or fmt.Segment.open(self.root, entry["name"])
            out.append(seg.with_deletes(entry.get("deletes")))
        return out

    def _tombstone(self, manifest: dict[str, Any], segments: list[fmt.Segment], ids: list[str]) -> int:
        """Mark every live copy of ``ids`` deleted (new tombstone files); returns how many existed."""
        hashes = np.array([fmt.id_hash(i) for i in ids], dtype=np.uint64)
        existed = 0
        gen = int(manifest["generation"]) + 1
        for n, seg in enumerate(segments):
            locs = seg.lookup(ids, hashes)
            locs = locs[locs >= 0]
            locs = locs[seg.deleted[locs] == 0]
            if not len(locs):
                continue
            existed += len(locs)
            deleted = np.array(seg.deleted, dtype=np.uint8)
            deleted[locs] = 1
            fname = f"deletes-g{gen:08d}.u8"
            fmt.write_file(seg.path / fname, deleted)
            segments[n] = fmt.Segment(**{**seg.__dict__, "deleted": deleted, "deletes_file": fname})
        return existed

    def _new_name(self, manifest: dict[str, Any]) -> str:
        manifest["segment_counter"] = int(manifest["segment_counter"]) + 1
        return f"seg-{manifest['segment_counter']:06d}-{os.urandom(4).hex()}"

    def upsert(self, docs: Iterable[TermDocument]) -> int:
        batch: dict[str, TermDocument] = {}
        vocab = self._snap.manifest.get("vocab_size")
        for doc in docs:
            if not isinstance(doc, TermDocument):
                raise InvalidQuery(f"expected TermDocument, got {type(doc).__name__}")
            validate_id(doc.id)
            terms = validate_weights(doc.terms, what=f"document {doc.id!r}", allow_empty=True)
            if vocab is not None and terms and max(terms) >= vocab:
                raise InvalidQuery(f"document {doc.id!r}: term id {max(terms)} >= vocab_size {vocab}")
            if not isinstance(doc.metadata, Mapping):
                raise InvalidQuery(f"document {doc.id!r}: metadata must be a mapping")
            batch.pop(doc.id, None)  # a later copy in the batch wins, and keeps its position
            batch[doc.id] = TermDocument(doc.id, terms, doc.metadata)
        if not batch:
            return 0
        ids = list(batch)
        lens = np.array([len(d.terms) for d in batch.values()], dtype=np.int64)
        total = int(lens.sum())
        terms = np.empty(total, dtype=np.int64)
        weights = np.empty(total, dtype=np.float64)
        pos = 0
        metadata = []
        for d in batch.values():
            n = len(d.terms)
            terms[pos : pos + n] = np.fromiter(d.terms.keys(), dtype=np.int64, count=n)
            weights[pos : pos + n] = np.fromiter(d.terms.values(), dtype=np.float64, count=n)
            pos += n
            try:
                metadata.append(json.dumps(dict(d.metadata), ensure_ascii=False).encode("utf-8"))
            except (TypeError, ValueError) as exc:
                raise InvalidQuery(f"document {d.id!r}: metadata is not JSON-serializable: {exc}") from None
        return self._write(ids, lens, terms, weights, metadata)

    def upsert_arrays(
        self,
        ids: list[str],
        indptr: np.ndarray,
        term_ids: np.ndarray,
        weights: np.ndarray,
        metadata: list[Mapping[str, Any]] | None = None,
    ) -> int:
        """Bulk upsert from CSR arrays (document i = ``term_ids/weights[indptr[i]:indptr[i+1]]``).

        The fast path for the indexer and benchmarks: validation is vectorized and no Python
        object is made per term. Same rules as ``upsert``; a repeated id keeps its last row.
        """
        ids = list(ids)
        indptr = np.asarray(indptr, dtype=np.int64)
        term_ids = np.asarray(term_ids)
        weights = np.asarray(weights, dtype=np.float64)
        if indptr.shape != (len(ids) + 1,) or indptr[0] != 0 or np.any(np.diff(indptr) < 0):
            raise InvalidQuery("indptr must be non-decreasing, start at 0 and have len(ids) + 1 entries")
        if term_ids.shape != weights.shape or term_ids.shape != (int(indptr[-1]),):
            raise InvalidQuery("term_ids and weights must both have indptr[-1] entries")
        if metadata is not None and len(metadata) != len(ids):
            raise InvalidQuery("metadata must have one mapping per id")
        for i in ids:
            validate_id(i)
        if len(term_ids) and (not np.issubdtype(term_ids.dtype, np.integer) or term_ids.min() < 0):
            raise InvalidQuery("term ids must be non-negative integers")
        term_ids = term_ids.astype(np.int64)
        if not np.all(np.isfinite(weights) & (weights > 0)):
            raise InvalidQuery("every weight must be finite and > 0")
        vocab = self._snap.manifest.get("vocab_size")
        if vocab is not None and len(term_ids) and term_ids.max() >= vocab:
            raise InvalidQuery(f"term id {int(term_ids.max())} >= vocab_size {vocab}")
        lens = np.diff(indptr)
        rows = np.repeat(np.arange(len(ids), dtype=np.int64), lens)
        if (
            len(term_ids)
            and (bad := kern.first_repeated_term_row(indptr, term_ids, int(term_ids.max()) + 1)) >= 0
        ):
            raise InvalidQuery(f"document {ids[bad]!r} lists the same term id twice")
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
                raise InvalidQuery(f"document {ids[n]!r}: metadata is not JSON-serializable: {exc}") from None
        if not ids:
            return 0
        return self._write(ids, lens, term_ids, weights, meta_json)

    def _write(
        self, ids: list[str], lens: np.ndarray, terms: np.ndarray, weights: np.ndarray, metadata: list[bytes]
    ) -> int:
        """Commit one validated batch as a new segment, tombstoning older copies of its ids."""
        wbits = round_like_embedded(weights).astype(np.float16).view(np.uint16)
        doc_of = np.repeat(np.arange(len(ids), dtype=np.int64), lens)
        with self._writing() as manifest:
            segments = self._open_segments(manifest)
            self._tombstone(manifest, segments, ids)
            name = self._new_name(manifest)
            shift = int(manifest["block_size"]).bit_length() - 1
            fmt.build_segment(self.root, name, shift, ids, terms, doc_of, wbits, metadata)
            segments.append(fmt.Segment.open(self.root, name).with_deletes(None))
            self._commit(manifest, segments)
            if len(segments) > self.max_segments:
                self._merge(manifest, self._open_segments(manifest), policy="tiered")
        return len(ids)

    def delete(self, ids: Iterable[str]) -> int:
        wanted = list(dict.fromkeys(validate_id(i) for i in ids))
        if not wanted:
            return 0
        with self._writing() as manifest:
            segments = self._open_segments(manifest)
            existed = self._tombstone(manifest, segments, wanted)
            if existed:
                self._commit(manifest, segments)
        return existed

    def compact(self) -> None:
        """Merge every segment into one and drop tombstones (reclaims space, speeds searches)."""
        with self._writing() as manifest:
            segments = self._open_segments(manifest)
            if len(segments) > 1 or any(s.deleted.any() for s in segments):
                self._merge(manifest, segments, policy="all")

    def _merge(self, manifest: dict[str, Any], segments: list[fmt.Segment], policy: str) -> None:
        if policy == "all":
            chosen = list(range(len(segments)))
        else:  # merge the smallest half-plus: each document is rewritten O(log n) times
            sizes = [s.n_docs - int(s.deleted.sum()) for s in segments]
            n_merge = len(segments) - self.max_segments // 2
            chosen = sorted(sorted(range(len(segments)), key=lambda i: sizes[i])[:n_merge])
        name = self._new_name(manifest)
        shift = int(manifest["block_size"]).bit_length() - 1
        fmt.merge_segments(self.root, name, shift, [segments[i] for i in chosen])
        rest = [s for i, s in enumerate(segments) if i not in set(chosen)]
        self._commit(manifest, [*rest, fmt.Segment.open(self.root, name).with_deletes(None)])

    def stats(self) -> dict[str, Any]:
        """Sizes for benchmarks and /metrics: documents, postings, bytes on disk."""
        snap = self._snapshot()
        postings = sum(s.n_postings for s in snap.segments)
        disk = 0
        for seg in snap.segments:
            disk += sum(f.stat().st_size for f in seg.path.iterdir() if f.is_file())
        return {
            "documents": self.count(),
            "segments": len(snap.segments),
            "postings": postings,
            "bytes_on_disk": disk,
            "bytes_per_posting": disk / postings if postings else math.nan,
            "generation": snap.generation,
        }

    def close(self) -> None:
        self._cache = {}
