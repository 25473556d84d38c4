"""The embedded engine: weighted-term documents in a directory, memory-mapped, no server.

Design (format details in ``embedded.format``):

- Log-structured: every write adds an immutable segment and/or tombstone files, then switches
  ``manifest.json`` with ``os.replace``. A crash at any point leaves the previous manifest, and
  so the last good state, readable; the dead writer's temp files are removed by the next writer.
- Writers serialize on ``fcntl.flock`` of ``write.lock`` (held per write, not per object), and
  re-read the manifest under the lock, so writers in several processes interleave safely.
- Readers hold an immutable snapshot (manifest + mapped segments). With ``auto_refresh`` (the
  default) each call ``stat``s the manifest (one syscall) and reloads only when it changed.
- Weights are stored as half floats (``embedded.weights.round_like_embedded``); scores are exact for the
  stored weights. Candidates come from summing 8-bit quantized upper bounds of saturate(w) in
  float32 (1 byte per document for frequent terms); every document that could still be in the
  top k by a proven margin is rescored in float64 (ascending term id, ``scoring.saturate_array``, as the
  oracle does), ties broken by id ascending. Call ``warmup()`` at service start: the kernels
  compile on first use (cached on disk by numba afterwards). Search: ``embedded.search``.
- Merges follow a tiered policy (``embedded.policy``): write amplification ~ log10(N).
- ``get`` rebuilds a document's terms from the postings (no forward index: keeps 4 bytes per
  stored term), so it returns the stored, rounded weights.
"""

from __future__ import annotations

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

import vsparta.termindex.embedded.format as fmt
from vsparta.termindex.base import (
    Hit,
    TermDocument,
    TermIndex,
    TermStatistics,
    validate_id,
    validate_k,
    validate_weights,
)
from vsparta.termindex.embedded.batches import Batch, batch_from_arrays, batch_from_documents
from vsparta.termindex.embedded.merge import merge_segments
from vsparta.termindex.embedded.policy import (
    MERGE_FACTOR,
    MergePolicy,
    TieredMergePolicy,
    live_sizes,
    plan_final_merge,
)
from vsparta.termindex.embedded.search import search_segments
from vsparta.termindex.embedded.statistics import SegmentCounts
from vsparta.termindex.embedded.weights import half_bits
from vsparta.termindex.embedded.writer import build_segment, tombstone
from vsparta.termindex.errors import DocumentNotFound, IndexNotFound, InvalidQuery, TermIndexError

log = logging.getLogger(__name__)

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


def _stat_key(manifest_path: str) -> tuple[int, int, int]:
    st = os.stat(manifest_path)
    return (st.st_ino, st.st_mtime_ns, st.st_size)


class EmbeddedIndex(TermIndex):
    """Files-on-disk engine. ``EmbeddedIndex(path, create=True)`` creates the directory if needed.

    Options: ``vocab_size`` (reject term ids >= it in documents and queries; stored in the
    manifest at creation), ``block_size`` (documents per postings block, a power of two
    <= 65536; small values only for tests), ``merge_factor`` (tiered merging, see
    ``embedded.policy``), ``max_segments`` (optional hard cap on top: tests and tiny indexes),
    ``merge_policy`` (replaces both), ``auto_refresh`` (see new commits on every call; otherwise
    call ``refresh()``), ``lock_timeout`` (seconds to wait for another writer; None waits forever).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        create: bool = False,
        *,
        vocab_size: int | None = None,
        block_size: int = DEFAULT_BLOCK_SIZE,
        merge_factor: int = MERGE_FACTOR,
        max_segments: int | None = None,
        merge_policy: MergePolicy | None = None,
        auto_refresh: bool = True,
        lock_timeout: float | None = None,
    ) -> None:
        if block_size < 1 or block_size > DEFAULT_BLOCK_SIZE or block_size & (block_size - 1):
            raise ValueError(f"block_size must be a power of two <= 65536, got {block_size}")
        if vocab_size is not None and (isinstance(vocab_size, bool) or int(vocab_size) < 1):
            raise ValueError(f"vocab_size must be a positive integer or None, got {vocab_size!r}")
        self.root = Path(path)
        self._manifest_path = str(self.root / fmt.MANIFEST)  # stat'ed by every call: no Path math
        self.merge_policy = merge_policy or TieredMergePolicy(merge_factor, max_segments)
        self.auto_refresh = auto_refresh
        self.lock_timeout = lock_timeout
        self._mutex = threading.Lock()
        self._cache: dict[str, fmt.Segment] = {}
        self._df_counts = SegmentCounts()
        if not (self.root / fmt.MANIFEST).exists():
            if not create:
                raise IndexNotFound(fmt.missing_index_message(self.root))
            self.root.mkdir(parents=True, exist_ok=True)
            with fmt.write_lock(self.root, self.lock_timeout):
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
                key = _stat_key(self._manifest_path)
                manifest = fmt.read_manifest(self.root)
                segments = []
                for entry in manifest["segments"]:
                    seg = self._cache.get(entry["name"]) or fmt.Segment.open(self.root, entry["name"])
                    segments.append(seg.with_deletes(entry.get("deletes")))
                self._cache = {s.name: s for s in segments}
                return _Snapshot(manifest, key, tuple(segments))
            except FileNotFoundError:
                if not (self.root / fmt.MANIFEST).exists():
                    raise IndexNotFound(fmt.missing_index_message(self.root)) from None
                time.sleep(0.005 * (attempt + 1))  # a writer replaced the manifest meanwhile
        raise TermIndexError(f"could not read a consistent state of {self.root}")

    def refresh(self) -> bool:
        """Pick up the latest committed generation; True if it changed. Costs one stat otherwise."""
        with self._mutex:
            if _stat_key(self._manifest_path) == self._snap.stat_key:
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

    def existing_metadata(self, ids: Iterable[str]) -> dict[str, Mapping[str, Any]]:
        """Id lookups in one snapshot, with metadata (``existing_ids``: the keys); no terms are read."""
        snap = self._snapshot()
        located = ((doc_id, self._locate(snap, validate_id(doc_id))) for doc_id in ids)
        return {doc_id: at[0].metadata(at[1]) for doc_id, at in located if at is not None}

    def get(self, doc_id: str) -> TermDocument:
        validate_id(doc_id)
        snap = self._snapshot()
        found = self._locate(snap, doc_id)
        if found is None:
            raise DocumentNotFound(doc_id)
        seg, local = found
        return seg.document(local)

    def warmup(self) -> None:
        """Compile (or load from numba's cache) the query kernels and touch the index once, so a
        service's first real query does not pay for it. Call at startup."""
        snap = self._snapshot()
        for seg in snap.segments:
            if seg.n_terms and len(seg.termmax):
                term = int(np.argmax(seg.termmax))
                self.search({term: 1.0}, k=1)
                return

    def finish_load(self) -> None:
        """After a complete load: the query kernels into numba's cache now, so a service started
        later loads them instead of compiling at its first query (it would keep ~110 MB of LLVM heap)."""
        self.warmup()

    def iter_ids(self) -> Iterator[str]:
        """Every live document's id, from one snapshot (ids only: no terms or metadata are read)."""
        segments = self._snapshot().segments
        return (seg.doc_id(local) for seg in segments for local in seg.live_locals().tolist())

    def iter_documents(self) -> Iterator[TermDocument]:
        """Every live document (slow: rebuilds terms from postings; for export and tests)."""
        snap = self._snapshot()
        for seg in snap.segments:
            for local in seg.live_locals().tolist():
                yield seg.document(local)

    def search(self, query: Mapping[int, float], k: int = 10, explain: bool = False) -> list[Hit]:
        k = validate_k(k)
        q = validate_weights(query, what="query")
        snap = self._snapshot()
        vocab = snap.manifest.get("vocab_size")
        if vocab is not None and max(q) >= vocab:
            raise InvalidQuery(f"query term id {max(q)} is outside the vocabulary (size {vocab})")
        return search_segments(snap.segments, q, k, explain)

    def term_statistics(self, term_ids: Iterable[int]) -> TermStatistics:
        """From one snapshot's postings (``embedded.statistics``); version: the manifest generation."""
        snap = self._snapshot()
        return self._df_counts.statistics(snap.segments, term_ids, f"generation {snap.generation}")

    # ------------------------------------------------------------------ writes

    @contextmanager
    def _writing(self) -> Iterator[dict[str, Any]]:
        """Lock, start from the latest manifest, clean up dead writers' leftovers."""
        with fmt.write_lock(self.root, self.lock_timeout):
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

    def _new_name(self, manifest: dict[str, Any]) -> str:
        manifest["segment_counter"] = int(manifest["segment_counter"]) + 1
        return f"seg-{manifest['segment_counter']:06d}-{os.urandom(4).hex()}"

    def upsert(self, docs: Iterable[TermDocument]) -> int:
        batch = batch_from_documents(docs, self._snap.manifest.get("vocab_size"))
        return self._write(batch) if batch is not None else 0

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
        batch = batch_from_arrays(
            ids, indptr, term_ids, weights, metadata, self._snap.manifest.get("vocab_size")
        )
        return self._write(batch) if batch is not None else 0

    def _write(self, batch: Batch) -> int:
        """Commit one validated batch as a new segment, tombstoning older copies of its ids."""
        ids = batch.ids
        wbits = half_bits(batch.weights)
        doc_of = np.repeat(np.arange(len(ids), dtype=np.int64), batch.lens)
        with self._writing() as manifest:
            segments = self._open_segments(manifest)
            tombstone(manifest, segments, ids)
            name = self._new_name(manifest)
            shift = int(manifest["block_size"]).bit_length() - 1
            nbytes = build_segment(
                self.root, name, shift, ids, batch.terms, doc_of, wbits, batch.metadata_json
            )
            fmt.count_write(manifest, "ingested", len(ids), nbytes)
            fmt.count_write(manifest, "written", len(ids), nbytes)
            segments.append(fmt.Segment.open(self.root, name).with_deletes(None))
            self._commit(manifest, segments)
            self._settle(manifest)
        return len(ids)

    def _settle(self, manifest: dict[str, Any]) -> None:
        """Merge while the policy asks (each merge its own crash-safe commit)."""
        while True:
            segments = self._open_segments(manifest)
            chosen = self.merge_policy.plan(live_sizes(manifest))
            if len(chosen) < 2:
                return
            self._merge(manifest, segments, chosen)

    @contextmanager
    def bulk_load(self) -> Iterator[EmbeddedIndex]:
        """A long write job: commits go on as usual (each one durable when ``upsert`` returns, so
        a kill loses nothing reported written), merged by the tiered policy; at the end the
        segments the load made are merged into one (``plan_final_merge``), so a full load leaves
        a single segment, and a small load into a big index leaves the big segments alone."""
        start = int(fmt.read_manifest(self.root).get("docs_ingested", 0))
        yield self
        with self._writing() as manifest:
            loaded = int(manifest.get("docs_ingested", 0)) - start
            chosen = plan_final_merge(live_sizes(manifest), loaded)
            if chosen:
                self._merge(manifest, self._open_segments(manifest), chosen)

    def delete(self, ids: Iterable[str]) -> int:
        wanted = list(dict.fromkeys(validate_id(i) for i in ids))
        if not wanted:
            return 0
        with self._writing() as manifest:
            segments = self._open_segments(manifest)
            existed = tombstone(manifest, segments, wanted)
            if existed:
                self._commit(manifest, segments)
        return existed

    def compact(self) -> None:
        """Merge every segment into one and drop tombstones (reclaims space, speeds searches)."""
        with self._writing() as manifest:
            segments = self._open_segments(manifest)
            if len(segments) > 1 or any(s.deleted.any() for s in segments):
                self._merge(manifest, segments, list(range(len(segments))))

    def _merge(self, manifest: dict[str, Any], segments: list[fmt.Segment], chosen: list[int]) -> None:
        """Replace ``segments[chosen]`` by one merged segment, placed last (``embedded.policy.settle``
        simulates exactly this order)."""
        name = self._new_name(manifest)
        shift = int(manifest["block_size"]).bit_length() - 1
        picked = set(chosen)
        nbytes = merge_segments(self.root, name, shift, [segments[i] for i in chosen])
        live = sum(segments[i].n_docs - int(segments[i].deleted.sum()) for i in chosen)
        fmt.count_write(manifest, "written", live, nbytes)
        rest = [s for i, s in enumerate(segments) if i not in picked]
        self._commit(manifest, [*rest, fmt.Segment.open(self.root, name).with_deletes(None)])

    def stats(self) -> dict[str, Any]:
        """Sizes for benchmarks and /metrics: documents, postings, bytes on disk, and write
        amplification (bytes written by commits, merges and tombstones over bytes committed)."""
        snap = self._snapshot()
        postings = sum(s.n_postings for s in snap.segments)
        disk = sum(f.stat().st_size for seg in snap.segments for f in seg.path.iterdir() if f.is_file())
        return {
            "documents": self.count(),
            "segments": len(snap.segments),
            "postings": postings,
            "bytes_on_disk": disk,
            "bytes_per_posting": disk / postings if postings else math.nan,
            "generation": snap.generation,
            **{key: int(snap.manifest.get(key, 0)) for key in fmt.WRITE_COUNTERS},
            "write_amplification": fmt.write_ratio(snap.manifest, "bytes"),
            "doc_write_amplification": fmt.write_ratio(snap.manifest, "docs"),
        }

    def close(self) -> None:
        self._cache = {}
