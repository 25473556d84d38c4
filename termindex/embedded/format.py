"""On-disk format of the embedded engine: a manifest naming immutable segment directories.

Index directory::

    manifest.json          the current state; replaced atomically (write temp, fsync, os.replace)
    write.lock             flock'ed by a writer for the duration of one write
    seg-000007-1a2b3c4d/   one immutable segment (written under a temp name, fsync'd, renamed)
        segment.json       counts, layout parameters and the quantization step
        doffsets.i64       (n_terms * n_blocks + 1) sparse postings before each (term, block) run
        woffsets.i64       (n_terms * n_blocks + 1) start of each run in weights.u16
        boffsets.i64       (n_terms * n_blocks + 1) start of each sparse run's ids in ids.u8
        hoffsets.i64       (n_terms * n_blocks + 1) start of each split run's entries in hdir/hend
        ids.u8             sparse runs: document ids inside the block, ascending, either flat
                           (2 bytes each) or split (low byte; high bytes in hdir.u8, one entry per
                           256-document sub-block, hend.u16 = where its postings end in the run)
        weights.u16        weight as IEEE half-float bits (see embedded.weights.round_like_embedded); a
                           dense run (no sparse postings) has one per document of the block, 0 = absent
        quant.u8           dense runs only: quantized upper bound of each saturate(weight), streamed by
                           queries (1 byte per document); see embedded.weights.quant_step
        blockmax.u16       largest weight bits of each (term, block) run: block-max pruning
        termmax.u16        largest weight bits of each term: the float32 error bound of a query
        docids.bin / docids.i64    document ids (UTF-8) and their offsets, by local id
        idhash.u64 / idorder.i32   blake2b-64 of each id, sorted, and the local id of each
        meta.bin / meta.i64        metadata as one JSON object per document, by offset
        deletes-g00000012.u8       tombstones (1 = deleted) as of that generation, if any

A stored term costs 2 bytes of weight plus its id in a sparse run: 2 bytes flat, or 1 byte
plus a share of a 3-byte directory entry when split (~3.3 bytes in all at the density of a
1000-term document over a 30K vocabulary); a dense run costs 3 bytes per document of the block
(used when more than half have the term), plus per-(term, block) and per-document overheads
(see ``embedded.postings`` for the encodings and why; ``embedded.writer`` writes segments,
``embedded.merge`` merges them).
Everything big is a raw little-endian array, memory-mapped read-only.
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import logging
import math
import os
import secrets
import shutil
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from vsparta.termindex.base import TermDocument
from vsparta.termindex.embedded.postings import document_terms
from vsparta.termindex.embedded.weights import QUANT_STEP
from vsparta.termindex.errors import IndexNotFound, TermIndexError

log = logging.getLogger(__name__)

FORMAT_NAME = "termindex-embedded"
FORMAT_VERSION = 4  # 4: split-encoded sparse ids (v3 stored every id as uint16)
MANIFEST = "manifest.json"
LOCK = "write.lock"
MAX_BLOCK_SHIFT = 16  # local ids inside a block are uint16
# Manifest counters of write amplification: what commits brought in vs everything written since
# creation (merges and tombstones included). Older manifests lack them: read as 0.
WRITE_COUNTERS = ("docs_ingested", "docs_written", "bytes_ingested", "bytes_written")


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


def read_only(array: np.ndarray) -> np.ndarray:
    """Every array a segment hands the kernels is read-only, memory-mapped or not: numba compiles
    one version of a kernel per argument type, and writability is part of the type (an index
    with no split run or no deletion would otherwise compile its own, mid-job or at a first query)."""
    array.flags.writeable = False
    return array


def map_array(path: Path, dtype: str) -> np.ndarray:
    """Memory-map a raw array read-only (an empty file gives an empty array: mmap refuses size 0)."""
    if path.stat().st_size == 0:
        return read_only(np.zeros(0, dtype=dtype))
    return np.asarray(np.memmap(path, dtype=dtype, mode="r"))


def read_manifest(root: Path) -> dict[str, Any]:
    try:
        with open(root / MANIFEST, "rb") as f:
            manifest = json.loads(f.read())
    except FileNotFoundError:
        raise IndexNotFound(missing_index_message(root)) from None
    if manifest.get("format") != FORMAT_NAME:
        raise TermIndexError(f"{root / MANIFEST} is not a {FORMAT_NAME} manifest")
    if manifest.get("version") != FORMAT_VERSION:
        raise TermIndexError(
            f"{root} was written in {FORMAT_NAME} format v{manifest.get('version')}; this version reads "
            f"v{FORMAT_VERSION} only: rebuild it into a new folder (`vsparta index IMAGES --backend "
            "embedded:NEW_FOLDER`, or from a term-document export without the model: `vsparta index "
            "EXPORT_DIR --format terms --backend embedded:NEW_FOLDER`)"
        )
    return manifest


def missing_index_message(root: Path) -> str:
    """What a user reads when no index is there: the command that builds one, not an API flag."""
    return f"no embedded index at {root}; build one with `vsparta index IMAGES --backend embedded:{root}`"


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
        **dict.fromkeys(WRITE_COUNTERS, 0),
    }


def count_write(manifest: dict[str, Any], what: str, docs: int, nbytes: int) -> None:
    """Add to the ``WRITE_COUNTERS`` (``what``: "ingested" or "written") before a commit."""
    manifest[f"docs_{what}"] = int(manifest.get(f"docs_{what}", 0)) + docs
    manifest[f"bytes_{what}"] = int(manifest.get(f"bytes_{what}", 0)) + nbytes


def write_ratio(manifest: dict[str, Any], unit: str) -> float:
    """Write amplification in ``unit`` ("bytes" or "docs"): written / ingested (NaN before any)."""
    ingested = int(manifest.get(f"{unit}_ingested", 0))
    return int(manifest.get(f"{unit}_written", 0)) / ingested if ingested else math.nan


@contextmanager
def write_lock(root: Path, timeout: float | None) -> Iterator[None]:
    """Hold ``flock`` on ``write.lock`` (one writer at a time, across processes); ``timeout``
    None waits forever. The lock dies with its process, so a killed writer never blocks."""
    fd = os.open(root / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if timeout is None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        else:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise TermIndexError(f"another writer holds {root / LOCK}") from None
                    time.sleep(0.01)
        yield
    finally:
        os.close(fd)  # releases the flock


def id_hash(doc_id: str) -> int:
    """Stable 64-bit hash of an id (Python's hash() differs between processes)."""
    return int.from_bytes(hashlib.blake2b(doc_id.encode("utf-8"), digest_size=8).digest(), "little")


# --------------------------------------------------------------------------- segments


# A segment's memory-mapped arrays: field, file and dtype (the layout in this module's docstring).
SEGMENT_ARRAYS = {
    "doffsets": ("doffsets.i64", "<i8"),
    "woffsets": ("woffsets.i64", "<i8"),
    "boffsets": ("boffsets.i64", "<i8"),
    "hoffsets": ("hoffsets.i64", "<i8"),
    "ids": ("ids.u8", "u1"),
    "hdir": ("hdir.u8", "u1"),
    "hend": ("hend.u16", "<u2"),
    "wbits": ("weights.u16", "<u2"),
    "quant": ("quant.u8", "u1"),
    "blockmax": ("blockmax.u16", "<u2"),
    "termmax": ("termmax.u16", "<u2"),
    "id_bytes": ("docids.bin", "u1"),
    "id_offsets": ("docids.i64", "<i8"),
    "id_hashes": ("idhash.u64", "<u8"),
    "id_order": ("idorder.i32", "<i4"),
    "meta_bytes": ("meta.bin", "u1"),
    "meta_offsets": ("meta.i64", "<i8"),
}


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
    quant_step: float
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
    deleted: np.ndarray = field(default_factory=lambda: read_only(np.zeros(0, np.uint8)))
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
            n_postings=info["n_postings"],
            quant_step=float(info.get("quant_step", QUANT_STEP)),  # older segments: the global step
            **{field: map_array(path / file, dtype) for field, (file, dtype) in SEGMENT_ARRAYS.items()},
        )

    def with_deletes(self, deletes_file: str | None) -> Segment:
        """This segment with the tombstones a manifest names (shares all the big arrays)."""
        if deletes_file == self.deletes_file and len(self.deleted) == self.n_docs:
            return self
        if deletes_file is None:
            deleted = read_only(np.zeros(self.n_docs, dtype=np.uint8))
        else:
            deleted = map_array(self.path / deletes_file, "u1")
        return dataclasses.replace(self, deleted=deleted, deletes_file=deletes_file)

    @property
    def postings(self) -> tuple[np.ndarray, ...]:
        """The arrays every postings kernel takes, in its argument order (see embedded.postings)."""
        offsets = (self.doffsets, self.woffsets, self.boffsets, self.hoffsets)
        return (*offsets, self.ids, self.hdir, self.hend, self.wbits)

    @cached_property
    def _id_view(self) -> memoryview:
        return memoryview(self.id_bytes)

    @cached_property
    def _meta_view(self) -> memoryview:
        return memoryview(self.meta_bytes)

    def doc_id(self, local: int) -> str:
        # memoryview slices, not numpy ones: a search decodes k ids, ~1 us each saved
        return str(self._id_view[int(self.id_offsets[local]) : int(self.id_offsets[local + 1])], "utf-8")

    def metadata(self, local: int) -> dict[str, Any]:
        a, b = int(self.meta_offsets[local]), int(self.meta_offsets[local + 1])
        if b - a <= 2:  # "" or "{}": the common case costs nothing
            return {}
        return json.loads(str(self._meta_view[a:b], "utf-8"))

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

    def document(self, local: int) -> TermDocument:
        """One stored document, its terms rebuilt from the postings (the stored, rounded weights)."""
        terms, bits = self.terms_of(local)
        weights = bits.view(np.float16).astype(np.float64)
        return TermDocument(
            id=self.doc_id(local),
            weights=dict(zip(terms.tolist(), weights.tolist(), strict=True)),
            metadata=self.metadata(local),
        )

    def live_locals(self) -> np.ndarray:
        return np.flatnonzero(self.deleted == 0)

    def terms_of(self, local: int) -> tuple[np.ndarray, np.ndarray]:
        return document_terms(
            *self.postings,
            self.n_terms,
            self.n_blocks,
            self.block_shift,
            local,
        )


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
