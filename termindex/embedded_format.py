"""On-disk format of the embedded engine: a manifest naming immutable segment directories.

Index directory::

    manifest.json          the current state; replaced atomically (write temp, fsync, os.replace)
    write.lock             flock'ed by a writer for the duration of one write
    seg-000007-1a2b3c4d/   one immutable segment (written under a temp name, fsync'd, renamed)
        segment.json       counts and layout parameters
        doffsets.i64       (n_terms * n_blocks + 1) sparse postings before each (term, block) run
        woffsets.i64       (n_terms * n_blocks + 1) start of each run in weights.u16
        boffsets.i64       (n_terms * n_blocks + 1) start of each sparse run's ids in ids.u8
        hoffsets.i64       (n_terms * n_blocks + 1) start of each split run's entries in hdir/hend
        ids.u8             sparse runs: document ids inside the block, ascending, either flat
                           (2 bytes each) or split (low byte; high bytes in hdir.u8, one entry per
                           256-document sub-block, hend.u16 = where its postings end in the run)
        weights.u16        weight as IEEE half-float bits (see oracle.round_like_embedded); a
                           dense run (no sparse postings) has one per document of the block, 0 = absent
        quant.u8           dense runs only: quantized upper bound of each log1p(weight), streamed by
                           queries (1 byte per document); see embedded_kernels.QUANT_STEP
        blockmax.u16       largest weight bits of each (term, block) run: block-max pruning
        termmax.u16        largest weight bits of each term: the float32 error bound of a query
        docids.bin / docids.i64    document ids (UTF-8) and their offsets, by local id
        idhash.u64 / idorder.i32   blake2b-64 of each id, sorted, and the local id of each
        meta.bin / meta.i64        metadata as one JSON object per document, by offset
        deletes-g00000012.u8       tombstones (1 = deleted) as of that generation, if any

A stored term costs 2 bytes of weight plus its id in a sparse run: 2 bytes flat, or 1 byte
plus a share of a 3-byte directory entry when split (~3.3 bytes in all at the density of a
1000-term document over a 30K vocabulary); a dense run costs 3 bytes per document of the block
(used when more than 3/4 have the term), plus per-(term, block) and per-document overheads
(see ``embedded_kernels`` for the encodings and why). Everything big is a raw little-endian array,
memory-mapped read-only.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from termindex import embedded_kernels as kern
from termindex.errors import IndexNotFound, TermIndexError

log = logging.getLogger(__name__)

FORMAT_NAME = "termindex-embedded"
FORMAT_VERSION = 4  # 4: split-encoded sparse ids (v3 stored every id as uint16)
MANIFEST = "manifest.json"
LOCK = "write.lock"
MAX_BLOCK_SHIFT = 16  # local ids inside a block are uint16


# --------------------------------------------------------------------------- durable writes


def fsync_dir(path: Path) -> None:
    """Make a rename or file creation inside ``path`` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_file(path: Path, data: bytes | np.ndarray) -> None:
    """Write and fsync one file (arrays as raw little-endian bytes)."""
    with open(path, "wb") as f:
        if isinstance(data, np.ndarray):
            if data.size:
                f.write(memoryview(np.ascontiguousarray(data)).cast("B"))
        else:
            f.write(data)
        f.flush()
        os.fsync(f.fileno())


def map_array(path: Path, dtype: str) -> np.ndarray:
    """Memory-map a raw array read-only (an empty file gives an empty array: mmap refuses size 0)."""
    if path.stat().st_size == 0:
        return np.zeros(0, dtype=dtype)
    return np.asarray(np.memmap(path, dtype=dtype, mode="r"))


def read_manifest(root: Path) -> dict[str, Any]:
    try:
        with open(root / MANIFEST, "rb") as f:
            manifest = json.loads(f.read())
    except FileNotFoundError:
        raise IndexNotFound(f"no embedded index at {root} (`vsparta index` builds one)") from None
    if manifest.get("format") != FORMAT_NAME:
        raise TermIndexError(f"{root / MANIFEST} is not a {FORMAT_NAME} manifest")
    if manifest.get("version") != FORMAT_VERSION:
        raise TermIndexError(
            f"{root} was written in {FORMAT_NAME} format v{manifest.get('version')}; this version reads "
            f"v{FORMAT_VERSION} only: rebuild it (vsparta index ... --recreate, or re-index a term-document "
            "export without the model)"
        )
    return manifest


def write_manifest(root: Path, manifest: dict[str, Any]) -> None:
    """Switch the index to ``manifest`` atomically: readers see the old or the new one, never half."""
    tmp = root / f".{MANIFEST}.tmp-{secrets.token_hex(4)}"
    write_file(tmp, json.dumps(manifest, indent=1, sort_keys=True).encode())
    os.replace(tmp, root / MANIFEST)
    fsync_dir(root)


def new_manifest(block_size: int, vocab_size: int | None) -> dict[str, Any]:
    return {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "generation": 0,
        "block_size": block_size,
        "vocab_size": vocab_size,
        "segment_counter": 0,
        "segments": [],
    }


def id_hash(doc_id: str) -> int:
    """Stable 64-bit hash of an id (Python's hash() differs between processes)."""
    return int.from_bytes(hashlib.blake2b(doc_id.encode("utf-8"), digest_size=8).digest(), "little")


# --------------------------------------------------------------------------- segments


@dataclass
class Segment:
    """One immutable segment, memory-mapped; ``deleted`` comes from the manifest's generation."""

    name: str
    path: Path
    n_docs: int
    n_terms: int
    n_blocks: int
    block_shift: int
    doffsets: np.ndarray
    woffsets: np.ndarray
    boffsets: np.ndarray
    hoffsets: np.ndarray
    n_postings: int
    ids: np.ndarray
    hdir: np.ndarray
    hend: np.ndarray
    wbits: np.ndarray
    quant: np.ndarray
    blockmax: np.ndarray
    termmax: np.ndarray
    id_bytes: np.ndarray
    id_offsets: np.ndarray
    id_hashes: np.ndarray
    id_order: np.ndarray
    meta_bytes: np.ndarray
    meta_offsets: np.ndarray
    deleted: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint8))
    deletes_file: str | None = None

    @classmethod
    def open(cls, root: Path, name: str) -> Segment:
        path = root / name
        with open(path / "segment.json", "rb") as f:
            info = json.loads(f.read())
        return cls(
            name=name,
            path=path,
            n_docs=info["n_docs"],
            n_terms=info["n_terms"],
            n_blocks=info["n_blocks"],
            block_shift=info["block_shift"],
            doffsets=map_array(path / "doffsets.i64", "<i8"),
            woffsets=map_array(path / "woffsets.i64", "<i8"),
            boffsets=map_array(path / "boffsets.i64", "<i8"),
            hoffsets=map_array(path / "hoffsets.i64", "<i8"),
            n_postings=info["n_postings"],
            ids=map_array(path / "ids.u8", "u1"),
            hdir=map_array(path / "hdir.u8", "u1"),
            hend=map_array(path / "hend.u16", "<u2"),
            wbits=map_array(path / "weights.u16", "<u2"),
            quant=map_array(path / "quant.u8", "u1"),
            blockmax=map_array(path / "blockmax.u16", "<u2"),
            termmax=map_array(path / "termmax.u16", "<u2"),
            id_bytes=map_array(path / "docids.bin", "u1"),
            id_offsets=map_array(path / "docids.i64", "<i8"),
            id_hashes=map_array(path / "idhash.u64", "<u8"),
            id_order=map_array(path / "idorder.i32", "<i4"),
            meta_bytes=map_array(path / "meta.bin", "u1"),
            meta_offsets=map_array(path / "meta.i64", "<i8"),
        )

    def with_deletes(self, deletes_file: str | None) -> Segment:
        """This segment with the tombstones a manifest names (shares all the big arrays)."""
        if deletes_file == self.deletes_file and len(self.deleted) == self.n_docs:
            return self
        if deletes_file is None:
            deleted = np.zeros(self.n_docs, dtype=np.uint8)
        else:
            deleted = map_array(self.path / deletes_file, "u1")
        seg = Segment(**{**self.__dict__, "deleted": deleted, "deletes_file": deletes_file})
        return seg

    @property
    def postings(self) -> tuple[np.ndarray, ...]:
        """The arrays every postings kernel takes, in its argument order (see embedded_kernels)."""
        offsets = (self.doffsets, self.woffsets, self.boffsets, self.hoffsets)
        return (*offsets, self.ids, self.hdir, self.hend, self.wbits)

    def doc_id(self, local: int) -> str:
        return bytes(self.id_bytes[self.id_offsets[local] : self.id_offsets[local + 1]]).decode("utf-8")

    def metadata(self, local: int) -> dict[str, Any]:
        raw = bytes(self.meta_bytes[self.meta_offsets[local] : self.meta_offsets[local + 1]])
        if raw in (b"", b"{}"):  # the common case costs nothing
            return {}
        return json.loads(raw.decode("utf-8"))

    def lookup(self, ids: Sequence[str], hashes: np.ndarray | None = None) -> np.ndarray:
        """Local id of each id in this segment (deleted or not), -1 where absent."""
        if hashes is None:
            hashes = np.array([id_hash(i) for i in ids], dtype=np.uint64)
        out = np.full(len(ids), -1, dtype=np.int64)
        if not self.n_docs or not len(ids):
            return out
        lo = np.searchsorted(self.id_hashes, hashes, side="left")
        hi = np.searchsorted(self.id_hashes, hashes, side="right")
        for i in np.flatnonzero(hi > lo):
            for pos in range(lo[i], hi[i]):  # more than one only on a 64-bit hash collision
                local = int(self.id_order[pos])
                if self.doc_id(local) == ids[i]:
                    out[i] = local
                    break
        return out

    def live_locals(self) -> np.ndarray:
        return np.flatnonzero(self.deleted == 0)

    def terms_of(self, local: int) -> tuple[np.ndarray, np.ndarray]:
        return kern.document_terms(
            *self.postings,
            self.n_terms,
            self.n_blocks,
            self.block_shift,
            local,
        )


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
) -> None:
    """Lay out dense runs, write the small files, fsync everything, rename the directory into place.

    ``out_docs``/``out_wbits`` hold the sparse layout in temp files; they are removed here.
    """
    doffsets, woffsets, boffsets, hoffsets = (np.zeros_like(offsets) for _ in range(4))
    kern.choose_layout(
        offsets, out_docs, n_docs, n_blocks, block_shift, doffsets, woffsets, boffsets, hoffsets
    )
    ids = _alloc(tmp, "ids.u8", int(boffsets[-1]), dtype="u1")
    hdir = _alloc(tmp, "hdir.u8", int(hoffsets[-1]), dtype="u1")
    hend = _alloc(tmp, "hend.u16", int(hoffsets[-1]))
    wbits = _alloc(tmp, "weights.u16", int(woffsets[-1]))
    quant = _alloc(tmp, "quant.u8", int(woffsets[-1] - doffsets[-1]), dtype="u1")
    if len(out_wbits):
        qtab = kern.quant_tables()[0]
        kern.densify(
            offsets, out_docs, out_wbits, doffsets, woffsets, boffsets, hoffsets, qtab,
            ids, hdir, hend, wbits, quant,
        )  # fmt: skip
    del out_docs, out_wbits
    for fname in ("sparse-docs.u16", "sparse-weights.u16"):
        (tmp / fname).unlink()
    blockmax = np.zeros(n_terms * n_blocks, dtype=np.uint16)
    kern.run_maxima(woffsets, wbits, blockmax)
    termmax = blockmax.reshape(n_terms, n_blocks).max(axis=1) if n_terms else np.zeros(0, np.uint16)
    for arr in (ids, hdir, hend, wbits, quant):  # written through np.memmap: flush to disk
        if isinstance(arr, np.memmap):
            arr.flush()
    del ids, hdir, hend, wbits, quant
    for fname in ("ids.u8", "hdir.u8", "hend.u16", "weights.u16", "quant.u8"):
        with open(tmp / fname, "rb+") as f:
            os.fsync(f.fileno())
    order = np.argsort(hashes, kind="stable").astype(np.int32)
    write_file(tmp / "doffsets.i64", doffsets.astype("<i8"))
    write_file(tmp / "woffsets.i64", woffsets.astype("<i8"))
    write_file(tmp / "boffsets.i64", boffsets.astype("<i8"))
    write_file(tmp / "hoffsets.i64", hoffsets.astype("<i8"))
    write_file(tmp / "blockmax.u16", blockmax.astype("<u2"))
    write_file(tmp / "termmax.u16", termmax.astype("<u2"))
    write_file(tmp / "docids.bin", id_bytes)
    write_file(tmp / "docids.i64", id_offsets.astype("<i8"))
    write_file(tmp / "idhash.u64", hashes[order].astype("<u8"))
    write_file(tmp / "idorder.i32", order.astype("<i4"))
    write_file(tmp / "meta.bin", meta_bytes)
    write_file(tmp / "meta.i64", meta_offsets.astype("<i8"))
    info = {
        "n_docs": n_docs,
        "n_terms": n_terms,
        "n_blocks": n_blocks,
        "block_shift": block_shift,
        "n_postings": int(offsets[-1]),
    }
    write_file(tmp / "segment.json", json.dumps(info).encode())
    fsync_dir(tmp)
    os.rename(tmp, root / name)
    fsync_dir(root)


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
) -> None:
    """Write a new segment from postings in document order (``terms``/``doc_of``/``wbits``)."""
    n_docs = len(ids)
    n_blocks = max(1, -(-n_docs // (1 << block_shift)))
    n_terms = int(terms.max()) + 1 if len(terms) else 0
    counts = np.zeros(n_terms * n_blocks, dtype=np.int64)
    kern.count_postings(terms, doc_of, n_blocks, block_shift, counts)
    offsets = np.zeros(n_terms * n_blocks + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    tmp = _temp_dir(root)
    out_docs = _alloc(tmp, "sparse-docs.u16", len(terms))
    out_wbits = _alloc(tmp, "sparse-weights.u16", len(terms))
    if len(terms):
        cursor = offsets[:-1].copy()
        kern.fill_postings(terms, doc_of, wbits, n_blocks, block_shift, cursor, out_docs, out_wbits)
    id_raw = [i.encode("utf-8") for i in ids]
    id_offsets = np.zeros(n_docs + 1, dtype=np.int64)
    np.cumsum([len(b) for b in id_raw], out=id_offsets[1:])
    meta_offsets = np.zeros(n_docs + 1, dtype=np.int64)
    np.cumsum([len(b) for b in metadata_json], out=meta_offsets[1:])
    _finish_segment(
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
    """Write one segment holding the live documents of ``segments`` (tombstones dropped)."""
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
        kern.remap_postings(
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
            kern.remap_postings(
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
        b, o = kern.gather_ranges(seg.id_bytes, seg.id_offsets, live)
        id_parts.append(b)
        idoff_parts.append(o)
        b, o = kern.gather_ranges(seg.meta_bytes, seg.meta_offsets, live)
        meta_parts.append(b)
        metaoff_parts.append(o)
        by_local = np.empty(seg.n_docs, dtype=np.uint64)
        by_local[seg.id_order] = seg.id_hashes
        hash_parts.append(by_local[live])
    _finish_segment(
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
    return n_docs


def _join_offsets(parts: list[np.ndarray]) -> np.ndarray:
    out = [np.zeros(1, dtype=np.int64)]
    base = 0
    for p in parts:
        out.append(p[1:] + base)
        base += int(p[-1])
    return np.concatenate(out)


def remove_unreferenced(root: Path, manifest: dict[str, Any]) -> None:
    """Delete temp files of dead writers, dropped segments and stale tombstone files.

    Called by a writer holding the lock. A reader still using a removed file keeps its mapping
    (POSIX); one that read the old manifest but had not opened a segment yet retries.
    """
    live = {s["name"]: s.get("deletes") for s in manifest["segments"]}
    for entry in root.iterdir():
        name = entry.name
        if name.startswith(".tmp-") or name.startswith(f".{MANIFEST}.tmp-"):
            _remove(entry)
        elif name.startswith("seg-") and entry.is_dir():
            if name not in live:
                _remove(entry)
                continue
            for f in entry.iterdir():
                if f.name.startswith("deletes-") and f.name != live[name]:
                    _remove(f)


def _remove(path: Path) -> None:
    try:
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()
    except FileNotFoundError:
        pass
    except OSError as exc:  # never fail a committed write over cleanup
        log.warning("could not remove %s: %s", path, exc)
