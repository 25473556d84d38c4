"""The streamed merge (issue 24) writes the same bytes as the in-memory merge it replaced, and
its own memory does not grow with the documents.

``termindex/embedded/merge.py`` no longer holds every document's id, metadata, hash and remap in
memory; the on-disk format did not change (same ``FORMAT_VERSION``), so a merged segment must be
byte-identical to the old code's on the same input. The digests below were computed by the old
merge (commit 646b956, ``writer.merge_segments``) on exactly these inputs, which use no random
generator (a fixed LCG), so they do not move with numpy's version.
"""

from __future__ import annotations

import hashlib
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

import vsparta.termindex.embedded.merge as merge
from vsparta.termindex.embedded.index import EmbeddedIndex

VOCAB = 2000

# sha256 of the merged segment's files (name and bytes, sorted by name) after each compact(),
# from commit 646b956 with today's layout rule patched in (runs dense when more than half of
# the block has the term; 646b956 said 3/4): {block_size: (first compact, second compact)}.
OLD_DIGESTS = {
    256: (
        "c89275ec7d9f179575bca5204dc7d0783a61009c6fe3664016ef4d7833198bab",
        "e55d8c5705ded667d076a4e76749c66a373cb944e1418a0669d40cdcc240f869",
    ),
    65_536: (
        "6d5b41eb2dd95e816212d19cde78fea63e03da9d37e45423edd527cf554ff149",
        "0fadc34f90e33949452b4622d6ff168b4a2eb35b9774a411064e9e6e75839be9",
    ),
}


def _lcg(seed: int, n: int) -> list[int]:
    out, x = [], seed
    for _ in range(n):
        x = (1103515245 * x + 12345) % 2**31
        out.append(x >> 8)
    return out


def _batch(ids: list[int]) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray, list[dict]]:
    """Documents with a term in ~90% of them (dense runs), one in half (sparse), and 5-64 others;
    ids and metadata of several shapes (empty, nested, non-ASCII)."""
    names, indptr, terms, weights, metadata = [], [0], [], [], []
    for i in ids:
        r = _lcg(i + 1, 70)
        row = {k % VOCAB for k in r[: 5 + r[0] % 60]}
        if i % 10 != 3:
            row.add(0)
        if i % 2:
            row.add(1)
        row_terms = sorted(row)
        terms += row_terms
        weights += [0.01 + (r[t % 70] % 1000) / 250 for t in row_terms]
        indptr.append(len(terms))
        names.append(f"doc-{i:05d}" if i % 7 else f"é/{i}")
        metadata.append({} if i % 3 == 0 else {"n": i, "path": f"d{i % 4}/{i}.jpg", "tags": ["ü"] * (i % 3)})
    return names, np.array(indptr), np.array(terms), np.array(weights), metadata


def _ids(lo: int, hi: int) -> list[str]:
    return _batch(list(range(lo, hi)))[0]


def _segment_digest(index: EmbeddedIndex) -> str:
    (seg,) = [p for p in index.root.iterdir() if p.name.startswith("seg-")]
    h = hashlib.sha256()
    for f in sorted(seg.iterdir()):
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def merged_digests(path: Path, block_size: int) -> tuple[str, str]:
    """Several segments with duplicates across them and deletes, compacted; then a new batch
    and compacted again (a merged segment merged again)."""
    index = EmbeddedIndex(path, create=True, block_size=block_size, merge_factor=1000)
    index.upsert_arrays(*_batch(list(range(0, 1200))))
    index.upsert_arrays(*_batch(list(range(1000, 2200))))  # 1000-1199 replace the first copies
    index.delete(_ids(50, 150) + _ids(1500, 1520))
    index.upsert_arrays(*_batch(list(range(2200, 3000)) + list(range(10, 20))))
    index.upsert_arrays(*_batch(list(range(3000, 3005))))
    index.delete(_ids(3000, 3004))  # a segment with one live document
    assert index.segment_count() == 4
    index.compact()
    first = _segment_digest(index)
    index.upsert_arrays(*_batch(list(range(2900, 3300))))
    index.delete(_ids(0, 10) + _ids(3100, 3110))
    index.compact()
    return first, _segment_digest(index)


@pytest.mark.parametrize("block_size", [256, 65_536])
def test_merged_segment_is_byte_identical_to_the_old_merge(tmp_path, block_size):
    assert merged_digests(tmp_path / "idx", block_size) == OLD_DIGESTS[block_size]
    index = EmbeddedIndex(tmp_path / "idx")
    assert index.count() == 3300 - 100 - 20 - 10 - 10  # 3000-3003 come back in the last batch
    # nothing but the manifest, the lock and the one segment: the merge's scratch files are gone
    assert sorted(p.name for p in index.root.iterdir() if not p.name.startswith("seg-")) == [
        "manifest.json",
        "write.lock",
    ]


def _merge_peak(path: Path, n: int) -> int:
    """Python-heap peak (numpy's arrays included) of merging 4 segments of n / 4 documents."""
    index = EmbeddedIndex(path, create=True, merge_factor=1000)
    for part in range(4):
        ids = [f"some/longer/path/photo-{part}-{i:07d}.jpg" for i in range(n // 4)]
        terms = np.arange(3 * len(ids)).reshape(-1, 3) % 50 + np.array([0, 50, 100])
        meta = [{"path": i, "width": 64} for i in ids]
        index.upsert_arrays(ids, np.arange(0, terms.size + 1, 3), terms.ravel(), np.ones(terms.size), meta)
    index.delete([f"some/longer/path/photo-0-{i:07d}.jpg" for i in range(0, n // 4, 3)])
    tracemalloc.start()
    try:
        index.compact()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_merge_memory_does_not_grow_with_documents(tmp_path, monkeypatch):
    """8x the documents, the same peak. Measured: the old merge's peak here was 1.1 MB at 4,000
    documents and 8.3 MB at 32,000 (~250 bytes per document); the streamed one's 0.58 and 0.54 MB
    (chunks of 512 here)."""
    monkeypatch.setattr(merge, "CHUNK", 512)
    small, big = _merge_peak(tmp_path / "small", 4_000), _merge_peak(tmp_path / "big", 32_000)
    assert big < 1.5 * small, (small, big)
    assert big < 32_000 * 50, big  # under 50 bytes per document, with the numpy copies it makes
