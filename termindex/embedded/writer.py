"""Writing the embedded engine's segments: from a batch of postings, their tombstones, and the
postings files and sealing step a merge (``embedded.merge``) shares.

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
    run_maxima,
)
from vsparta.termindex.embedded.format import Segment, id_hash
from vsparta.termindex.embedded.weights import QUANT_STEP, quant_step, quant_tables


def write_postings(
    tmp: Path,
    *,
    n_docs: int,
    n_terms: int,
    n_blocks: int,
    block_shift: int,
    offsets: np.ndarray,
    out_docs: np.ndarray,
    out_wbits: np.ndarray,
) -> dict[str, Any]:
    """Lay out dense runs and write every postings file into ``tmp``, fsync'd; returns the
    segment.json fields they fix.

    ``out_docs``/``out_wbits`` hold the sparse layout in temp files; they are removed here. The
    per-(term, block) arrays are written through file-backed maps too: with 65,536-document
    blocks and 30,522 terms a big merge has ~0.47 keys per document (4 bytes per int64 array).
    """
    n_keys = len(offsets) - 1
    doffsets, woffsets, boffsets, hoffsets = (
        alloc_array(tmp, f"{k}offsets.i64", n_keys + 1, dtype="<i8") for k in "dwbh"
    )
    choose_layout(offsets, out_docs, n_docs, n_blocks, block_shift, doffsets, woffsets, boffsets, hoffsets)
    ids = alloc_array(tmp, "ids.u8", int(boffsets[-1]), dtype="u1")
    hdir = alloc_array(tmp, "hdir.u8", int(hoffsets[-1]), dtype="u1")
    hend = alloc_array(tmp, "hend.u16", int(hoffsets[-1]))
    wbits = alloc_array(tmp, "weights.u16", int(woffsets[-1]))
    quant = alloc_array(tmp, "quant.u8", int(woffsets[-1] - doffsets[-1]), dtype="u1")
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
    blockmax = alloc_array(tmp, "blockmax.u16", n_terms * n_blocks)
    run_maxima(woffsets, wbits, blockmax)
    termmax = blockmax.reshape(n_terms, n_blocks).max(axis=1) if n_terms else np.zeros(0, np.uint16)
    sync_arrays(
        tmp,
        {
            "ids.u8": ids, "hdir.u8": hdir, "hend.u16": hend, "weights.u16": wbits, "quant.u8": quant,
            "doffsets.i64": doffsets, "woffsets.i64": woffsets, "boffsets.i64": boffsets,
            "hoffsets.i64": hoffsets, "blockmax.u16": blockmax,
        },
    )  # fmt: skip
    fmt.write_file(tmp / "termmax.u16", termmax.astype("<u2"))
    return {"quant_step": step, "n_postings": int(offsets[-1])}


def sync_arrays(tmp: Path, arrays: dict[str, np.ndarray]) -> None:
    """Flush arrays written through ``np.memmap`` and fsync their files."""
    for fname, arr in arrays.items():
        if isinstance(arr, np.memmap):
            arr.flush()
        with open(tmp / fname, "rb+") as f:
            os.fsync(f.fileno())


def seal_segment(root: Path, tmp: Path, name: str, info: dict[str, Any]) -> int:
    """Write segment.json, fsync the directory and rename it into place; returns the bytes the
    segment holds (for write-amplification accounting)."""
    fmt.write_file(tmp / "segment.json", json.dumps(info).encode())
    written = sum(f.stat().st_size for f in tmp.iterdir())
    fmt.fsync_dir(tmp)
    os.rename(tmp, root / name)
    fmt.fsync_dir(root)
    return written


def segment_info(
    *, n_docs: int, n_terms: int, n_blocks: int, block_shift: int, postings: dict[str, Any]
) -> dict[str, Any]:
    """segment.json's fields, in the order the format has always written them."""
    return {
        "quant_step": postings["quant_step"],
        "n_docs": n_docs,
        "n_terms": n_terms,
        "n_blocks": n_blocks,
        "block_shift": block_shift,
        "n_postings": postings["n_postings"],
    }


def alloc_array(tmp: Path, fname: str, size: int, dtype: str = "<u2") -> np.ndarray:
    """An output array backed by a file, so big segments need not fit in RAM twice."""
    if size == 0:
        (tmp / fname).touch()
        return np.zeros(0, dtype=dtype)
    return np.memmap(tmp / fname, dtype=dtype, mode="w+", shape=(size,))


def temp_dir(root: Path) -> Path:
    """A fresh ``.tmp-*`` directory in the index (a dead writer's is removed by the next one)."""
    tmp = root / f".tmp-{secrets.token_hex(6)}"
    tmp.mkdir()
    return tmp


def _write_documents(
    tmp: Path, ids: Sequence[str], hashes: np.ndarray, metadata_json: Sequence[bytes]
) -> None:
    """The document table of a built segment: ids, their sorted hashes, metadata."""
    id_raw = [i.encode("utf-8") for i in ids]
    id_offsets = np.zeros(len(ids) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in id_raw], out=id_offsets[1:])
    meta_offsets = np.zeros(len(ids) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in metadata_json], out=meta_offsets[1:])
    order = np.argsort(hashes, kind="stable").astype(np.int32)
    fmt.write_file(tmp / "docids.bin", np.frombuffer(b"".join(id_raw), dtype=np.uint8))
    fmt.write_file(tmp / "docids.i64", id_offsets.astype("<i8"))
    fmt.write_file(tmp / "idhash.u64", hashes[order].astype("<u8"))
    fmt.write_file(tmp / "idorder.i32", order.astype("<i4"))
    fmt.write_file(tmp / "meta.bin", np.frombuffer(b"".join(metadata_json), dtype=np.uint8))
    fmt.write_file(tmp / "meta.i64", meta_offsets.astype("<i8"))


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
    tmp = temp_dir(root)
    out_docs = alloc_array(tmp, "sparse-docs.u16", len(terms))
    out_wbits = alloc_array(tmp, "sparse-weights.u16", len(terms))
    if len(terms):
        cursor = offsets[:-1].copy()
        fill_postings(terms, doc_of, wbits, n_blocks, block_shift, cursor, out_docs, out_wbits)
    layout = {"n_docs": n_docs, "n_terms": n_terms, "n_blocks": n_blocks, "block_shift": block_shift}
    postings = write_postings(tmp, **layout, offsets=offsets, out_docs=out_docs, out_wbits=out_wbits)
    _write_documents(tmp, ids, np.array([id_hash(i) for i in ids], dtype=np.uint64), metadata_json)
    return seal_segment(root, tmp, name, segment_info(**layout, postings=postings))


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
        segments[n] = replace(seg, deleted=fmt.read_only(deleted), deletes_file=fname)
    return existed
