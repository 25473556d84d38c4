"""Merging segments of the embedded engine in memory that does not grow with the documents.

A merge writes one segment holding the live documents of several, in their order (a document's
new local id is its rank among the live ones). Everything that grows with the documents goes
through files, as the postings always did: the old -> new id map, the per-(term, block) counts
and offsets, the sparse postings and the document table. Ids and metadata are copied ``CHUNK``
source documents at a time, and the sorted id-hash table is a k-way merge of the sources' own
sorted tables (``build.merge_sorted_runs``) instead of a sort of every hash in memory. So the
process's own memory is O(CHUNK + segments) however many documents there are (it was ~300 bytes
per document: 404 MB at 1M), and the files are byte for byte those of the in-memory merge
(``tests/termindex/test_embedded_merge_bytes.py``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from vsparta.termindex.embedded.build import gather_ranges, merge_sorted_runs, remap_postings
from vsparta.termindex.embedded.format import Segment
from vsparta.termindex.embedded.writer import (
    alloc_array,
    seal_segment,
    segment_info,
    sync_arrays,
    temp_dir,
    write_postings,
)

CHUNK = 1 << 16  # source documents per step of the document copy (a few MB of temporaries)


def merge_segments(root: Path, name: str, block_shift: int, segments: Sequence[Segment]) -> int:
    """Write one segment holding the live documents of ``segments`` (tombstones dropped); returns
    its size in bytes."""
    tmp = temp_dir(root)
    scratch = temp_dir(root)  # removed below; after a crash, by the next writer (a ".tmp-" name)
    try:
        remaps, n_docs = _remaps(scratch, segments)
        n_blocks = max(1, -(-n_docs // (1 << block_shift)))
        n_terms = max((s.n_terms for s in segments), default=0)
        offsets, out_docs, out_wbits = _merge_postings(tmp, scratch, segments, remaps, n_terms, n_blocks)
        layout = {"n_docs": n_docs, "n_terms": n_terms, "n_blocks": n_blocks, "block_shift": block_shift}
        postings = write_postings(tmp, **layout, offsets=offsets, out_docs=out_docs, out_wbits=out_wbits)
        del offsets, out_docs, out_wbits
        _copy_documents(tmp, segments)
        _merge_hashes(tmp, scratch, segments, remaps, n_docs)
        return seal_segment(root, tmp, name, segment_info(**layout, postings=postings))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _live(seg: Segment, start: int) -> np.ndarray:
    """Local ids of the live documents among ``seg``'s ``CHUNK`` from ``start``."""
    return start + np.flatnonzero(seg.deleted[start : start + CHUNK] == 0)


def _remaps(scratch: Path, segments: Sequence[Segment]) -> tuple[list[np.ndarray], int]:
    """Each source's old -> new local id (-1: deleted), views of one file-backed array; and the
    number of live documents."""
    remap = alloc_array(scratch, "remap.i64", sum(s.n_docs for s in segments), dtype="<i8")
    views: list[np.ndarray] = []
    base = start = 0
    for seg in segments:
        view = remap[base : base + seg.n_docs]
        for a in range(0, seg.n_docs, CHUNK):
            live = seg.deleted[a : a + CHUNK] == 0
            rank = np.cumsum(live)
            view[a : a + len(live)] = np.where(live, start + rank - 1, -1)
            start += int(rank[-1])
        views.append(view)
        base += seg.n_docs
    return views, start


def _merge_postings(
    tmp: Path,
    scratch: Path,
    segments: Sequence[Segment],
    remaps: list[np.ndarray],
    n_terms: int,
    n_blocks: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Both passes of ``remap_postings`` over the sources: postings per (term, block) key, then
    every live posting scattered into the sparse layout; returns (offsets, docs, weights)."""
    n_keys = n_terms * n_blocks
    counts = alloc_array(scratch, "counts.i64", n_keys, dtype="<i8")
    empty = np.zeros(0, dtype=np.uint16)

    def each_source(cursor: np.ndarray, out_docs: np.ndarray, out_wbits: np.ndarray, fill: bool) -> None:
        for seg, remap in zip(segments, remaps, strict=True):
            remap_postings(
                *seg.postings, seg.n_terms, seg.n_blocks, seg.block_shift, remap, n_blocks,
                counts, cursor, out_docs, out_wbits, fill,
            )  # fmt: skip

    each_source(np.zeros(0, dtype=np.int64), empty, empty, False)
    offsets = alloc_array(scratch, "offsets.i64", n_keys + 1, dtype="<i8")
    np.cumsum(counts, out=offsets[1:])
    out_docs = alloc_array(tmp, "sparse-docs.u16", int(offsets[-1]))
    out_wbits = alloc_array(tmp, "sparse-weights.u16", int(offsets[-1]))
    if offsets[-1]:
        cursor = alloc_array(scratch, "cursor.i64", n_keys, dtype="<i8")
        cursor[:] = offsets[:-1]
        each_source(cursor, out_docs, out_wbits, True)
    return offsets, out_docs, out_wbits


def _copy_documents(tmp: Path, segments: Sequence[Segment]) -> None:
    """docids.bin/.i64 and meta.bin/.i64: the live documents' ids and metadata in new-id order,
    appended to the files ``CHUNK`` source documents at a time."""
    tables = (("docids", "id_bytes", "id_offsets"), ("meta", "meta_bytes", "meta_offsets"))
    for fname, bytes_field, offsets_field in tables:
        with open(tmp / f"{fname}.bin", "wb") as data, open(tmp / f"{fname}.i64", "wb") as offsets:
            offsets.write(np.zeros(1, dtype="<i8").tobytes())
            end = 0
            for seg in segments:
                src, src_offsets = getattr(seg, bytes_field), getattr(seg, offsets_field)
                for a in range(0, seg.n_docs, CHUNK):
                    out, out_offsets = gather_ranges(src, src_offsets, _live(seg, a))
                    data.write(memoryview(out))
                    offsets.write(memoryview((out_offsets[1:] + end).astype("<i8", copy=False)))
                    end += int(out_offsets[-1])
            for f in (data, offsets):
                f.flush()
                os.fsync(f.fileno())


def _merge_hashes(
    tmp: Path, scratch: Path, segments: Sequence[Segment], remaps: list[np.ndarray], n_docs: int
) -> None:
    """idhash.u64/idorder.i32: every live id's hash, ascending, and its new local id.

    Each source's table is sorted by (hash, local id) and the remap keeps local-id order, so its
    live entries, renumbered, are a run sorted by (hash, new id), and new ids grow from source
    to source: the k-way merge gives exactly the stable argsort the in-memory merge made."""
    run_keys = alloc_array(scratch, "runs.u64", n_docs, dtype="<u8")
    run_values = alloc_array(scratch, "runs.i32", n_docs, dtype="<i4")
    bounds = np.zeros(len(segments) + 1, dtype=np.int64)
    at = 0
    for r, (seg, remap) in enumerate(zip(segments, remaps, strict=True)):
        for a in range(0, seg.n_docs, CHUNK):
            new = remap[seg.id_order[a : a + CHUNK]]
            keep = new >= 0
            n = int(keep.sum())
            run_keys[at : at + n] = seg.id_hashes[a : a + CHUNK][keep]
            run_values[at : at + n] = new[keep]
            at += n
        bounds[r + 1] = at
    hashes = alloc_array(tmp, "idhash.u64", n_docs, dtype="<u8")
    order = alloc_array(tmp, "idorder.i32", n_docs, dtype="<i4")
    if n_docs:
        merge_sorted_runs(run_keys, run_values, bounds, hashes, order)
    sync_arrays(tmp, {"idhash.u64": hashes, "idorder.i32": order})
