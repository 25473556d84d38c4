"""Writing the embedded engine's segments: from a batch of postings, by merging segments, and
their tombstones.

Every segment is written under a temp directory, fsync'd file by file, then renamed into place,
so a crash leaves either no segment or a complete one (the manifest names it only afterwards).
Big outputs are file-backed memory maps, so a large merge need not fit in RAM twice.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

import vsparta.termindex.embedded.format as fmt  # called through the module: tests patch its writes
from vsparta.termindex.embedded.build import (
    choose_layout,
    count_postings,
    densify,
    fill_postings,
    gather_ranges,
    remap_postings,
    run_maxima,
)
from vsparta.termindex.embedded.format import Segment, id_hash
from vsparta.termindex.embedded.weights import QUANT_STEP, quant_step, quant_tables


def _finish_segment(
    root: Path,
    tmp: Path,
    name: str,
    *,
    n_docs: int,
    n_terms: int,
    n_blocks: int,
    block_shift: int,
    offsets: np.ndarray,
    out_docs: np.ndarray,
    out_wbits: np.ndarray,
    id_bytes: np.ndarray,
    id_offsets: np.ndarray,
    hashes: np.ndarray,
    meta_bytes: np.ndarray,
    meta_offsets: np.ndarray,
) -> int:
    """Lay out dense runs, write the small files, fsync everything, rename the directory into place.

    ``out_docs``/``out_wbits`` hold the sparse layout in temp files; they are removed here.
    Returns the bytes the segment holds (for write-amplification accounting).
    """
    doffsets, woffsets, boffsets, hoffsets = (np.zeros_like(offsets) for _ in range(4))
    choose_layout(offsets, out_docs, n_docs, n_blocks, block_shift, doffsets, woffsets, boffsets, hoffsets)
    ids = _alloc(tmp, "ids.u8", int(boffsets[-1]), dtype="u1")
    hdir = _alloc(tmp, "hdir.u8", int(hoffsets[-1]), dtype="u1")
    hend = _alloc(tmp, "hend.u16", int(hoffsets[-1]))
    wbits = _alloc(tmp, "weights.u16", int(woffsets[-1]))
    quant = _alloc(tmp, "quant.u8", int(woffsets[-1] - doffsets[-1]), dtype="u1")
    step = quant_step(int(out_wbits.max())) if len(out_wbits) else QUANT_STEP
    if len(out_wbits):
        qtab = quant_tables(step)
        densify(
            offsets, out_docs, out_wbits, doffsets, woffsets, boffsets, hoffsets, qtab,
            ids, hdir, hend, wbits, quant,
        )  # fmt: skip
    del out_docs, out_wbits
    for fname in ("sparse-docs.u16", "sparse-weights.u16"):
        (tmp / fname).unlink()
    blockmax = np.zeros(n_terms * n_blocks, dtype=np.uint16)
    run_maxima(woffsets, wbits, blockmax)
    termmax = blockmax.reshape(n_terms, n_blocks).max(axis=1) if n_terms else np.zeros(0, np.uint16)
    for arr in (ids, hdir, hend, wbits, quant):  # written through np.memmap: flush to disk
        if isinstance(arr, np.memmap):
            arr.flush()
    del ids, hdir, hend, wbits, quant
    for fname in ("ids.u8", "hdir.u8", "hend.u16", "weights.u16", "quant.u8"):
        with open(tmp / fname, "rb+") as f:
            os.fsync(f.fileno())
    order = np.argsort(hashes, kind="stable").astype(np.int32)
    fmt.write_file(tmp / "doffsets.i64", doffsets.astype("<i8"))
    fmt.write_file(tmp / "woffsets.i64", woffsets.astype("<i8"))
    fmt.write_file(tmp / "boffsets.i64", boffsets.astype("<i8"))
    fmt.write_file(tmp / "hoffsets.i64", hoffsets.astype("<i8"))
    fmt.write_file(tmp / "blockmax.u16", blockmax.astype("<u2"))
    fmt.write_file(tmp / "termmax.u16", termmax.astype("<u2"))
    fmt.write_file(tmp / "docids.bin", id_bytes)
    fmt.write_file(tmp / "docids.i64", id_offsets.astype("<i8"))
    fmt.write_file(tmp / "idhash.u64", hashes[order].astype("<u8"))
    fmt.write_file(tmp / "idorder.i32", order.astype("<i4"))
    fmt.write_file(tmp / "meta.bin", meta_bytes)
    fmt.write_file(tmp / "meta.i64", meta_offsets.astype("<i8"))
    info = {
        "quant_step": step,
        "n_docs": n_docs,
        "n_terms": n_terms,
        "n_blocks": n_blocks,
        "block_shift": block_shift,
        "n_postings": int(offsets[-1]),
    }
    fmt.write_file(tmp / "segment.json", json.dumps(info).encode())
    written = sum(f.stat().st_size for f in tmp.iterdir())
    fmt.fsync_dir(tmp)
    os.rename(tmp, root / name)
    fmt.fsync_dir(root)
    return written


def _alloc(tmp: Path, fname: str, size: int, dtype: str = "<u2") -> np.ndarray:
    """An output array backed by a file, so big segments need not fit in RAM twice."""
    if size == 0:
        (tmp / fname).touch()
        return np.zeros(0, dtype=dtype)
    return np.memmap(tmp / fname, dtype=dtype, mode="w+", shape=(size,))


def _temp_dir(root: Path) -> Path:
    tmp = root / f".tmp-{secrets.token_hex(6)}"
    tmp.mkdir()
    return tmp


def build_segment(
    root: Path,
    name: str,
    block_shift: int,
    ids: Sequence[str],
    terms: np.ndarray,
    doc_of: np.ndarray,
    wbits: np.ndarray,
    metadata_json: Sequence[bytes],
) -> int:
    """Write a new segment from postings in document order (``terms``/``doc_of``/``wbits``);
    returns its size in bytes."""
    n_docs = len(ids)
    n_blocks = max(1, -(-n_docs // (1 << block_shift)))
    n_terms = int(terms.max()) + 1 if len(terms) else 0
    counts = np.zeros(n_terms * n_blocks, dtype=np.int64)
    count_postings(terms, doc_of, n_blocks, block_shift, counts)
    offsets = np.zeros(n_terms * n_blocks + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    tmp = _temp_dir(root)
    out_docs = _alloc(tmp, "sparse-docs.u16", len(terms))
    out_wbits = _alloc(tmp, "sparse-weights.u16", len(terms))
    if len(terms):
        cursor = offsets[:-1].copy()
        fill_postings(terms, doc_of, wbits, n_blocks, block_shift, cursor, out_docs, out_wbits)
    id_raw = [i.encode("utf-8") for i in ids]
    id_offsets = np.zeros(n_docs + 1, dtype=np.int64)
    np.cumsum([len(b) for b in id_raw], out=id_offsets[1:])
    meta_offsets = np.zeros(n_docs + 1, dtype=np.int64)
    np.cumsum([len(b) for b in metadata_json], out=meta_offsets[1:])
    return _finish_segment(
        root,
        tmp,
        name,
        n_docs=n_docs,
        n_terms=n_terms,
        n_blocks=n_blocks,
        block_shift=block_shift,
        offsets=offsets,
        out_docs=out_docs,
        out_wbits=out_wbits,
        id_bytes=np.frombuffer(b"".join(id_raw), dtype=np.uint8),
        id_offsets=id_offsets,
        hashes=np.array([id_hash(i) for i in ids], dtype=np.uint64),
        meta_bytes=np.frombuffer(b"".join(metadata_json), dtype=np.uint8),
        meta_offsets=meta_offsets,
    )


def merge_segments(root: Path, name: str, block_shift: int, segments: Sequence[Segment]) -> int:
    """Write one segment holding the live documents of ``segments`` (tombstones dropped); returns
    its size in bytes."""
    remaps = []
    lives = []
    start = 0
    for seg in segments:
        live = seg.live_locals()
        remap = np.full(seg.n_docs, -1, dtype=np.int64)
        remap[live] = np.arange(start, start + len(live))
        start += len(live)
        remaps.append(remap)
        lives.append(live)
    n_docs = start
    n_blocks = max(1, -(-n_docs // (1 << block_shift)))
    n_terms = max((s.n_terms for s in segments), default=0)
    counts = np.zeros(n_terms * n_blocks, dtype=np.int64)
    empty = np.zeros(0, dtype=np.uint16)
    cursor = np.zeros(0, dtype=np.int64)
    for seg, remap in zip(segments, remaps, strict=True):
        remap_postings(
            *seg.postings,
            seg.n_terms,
            seg.n_blocks,
            seg.block_shift,
            remap,
            n_blocks,
            counts,
            cursor,
            empty,
            empty,
            False,
        )
    offsets = np.zeros(n_terms * n_blocks + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    tmp = _temp_dir(root)
    out_docs = _alloc(tmp, "sparse-docs.u16", int(offsets[-1]))
    out_wbits = _alloc(tmp, "sparse-weights.u16", int(offsets[-1]))
    cursor = offsets[:-1].copy()
    if offsets[-1]:
        for seg, remap in zip(segments, remaps, strict=True):
            remap_postings(
                *seg.postings,
                seg.n_terms,
                seg.n_blocks,
                seg.block_shift,
                remap,
                n_blocks,
                counts,
                cursor,
                out_docs,
                out_wbits,
                True,
            )
    id_parts, idoff_parts, meta_parts, metaoff_parts, hash_parts = [], [], [], [], []
    for seg, live in zip(segments, lives, strict=True):
        b, o = gather_ranges(seg.id_bytes, seg.id_offsets, live)
        id_parts.append(b)
        idoff_parts.append(o)
        b, o = gather_ranges(seg.meta_bytes, seg.meta_offsets, live)
        meta_parts.append(b)
        metaoff_parts.append(o)
        by_local = np.empty(seg.n_docs, dtype=np.uint64)
        by_local[seg.id_order] = seg.id_hashes
        hash_parts.append(by_local[live])
    return _finish_segment(
        root,
        tmp,
        name,
        n_docs=n_docs,
        n_terms=n_terms,
        n_blocks=n_blocks,
        block_shift=block_shift,
        offsets=offsets,
        out_docs=out_docs,
        out_wbits=out_wbits,
        id_bytes=np.concatenate(id_parts) if id_parts else np.zeros(0, np.uint8),
        id_offsets=_join_offsets(idoff_parts),
        hashes=np.concatenate(hash_parts) if hash_parts else np.zeros(0, np.uint64),
        meta_bytes=np.concatenate(meta_parts) if meta_parts else np.zeros(0, np.uint8),
        meta_offsets=_join_offsets(metaoff_parts),
    )


def _join_offsets(parts: list[np.ndarray]) -> np.ndarray:
    out = [np.zeros(1, dtype=np.int64)]
    base = 0
    for p in parts:
        out.append(p[1:] + base)
        base += int(p[-1])
    return np.concatenate(out)


def tombstone(manifest: dict[str, Any], segments: list[Segment], ids: list[str]) -> int:
    """Mark every live copy of ``ids`` deleted (a new deletes file per segment touched, replacing
    its entry in ``segments``); returns how many existed.

    Counts the tombstone bytes in ``manifest``; the caller commits it."""
    hashes = np.array([id_hash(i) for i in ids], dtype=np.uint64)
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
        manifest["bytes_written"] = manifest.get("bytes_written", 0) + len(deleted)
        segments[n] = replace(seg, deleted=deleted, deletes_file=fname)
    return existed
