"""The streamed merge (issue 24) writes the same bytes as the in-memory merge it replaced, and
its own memory does not grow with the documents.

``termindex/embedded/merge.py`` no longer holds every document's id, metadata, hash and remap in
memory; the on-disk format did not change (same ``FORMAT_VERSION``), so a merged segment must be
byte-identical to the old code's on the same input. The digests were first computed by the old
merge (commit 646b956, ``writer.merge_segments``) on exactly these inputs, which use no random
generator (a fixed LCG), so they do not move with numpy's version; the streamed merge matched them.
They did move with the CPU: the stored bounds came from numpy's log1p, whose AVX-512 path gives
other last bits than libm's (the old digests held on such machines only). Since 2026-11-27 the
bounds come from libm's log1p on every CPU (``weights.stored_saturation_table``) and the digests
below are the streamed merge's under that rule, computed on a CPU without AVX-512, where numpy's
log1p is libm's, so the bounds are the same bits the old rule gave there.
"""

from __future__ import annotations

import hashlib
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

import vsparta.termindex.embedded.merge as merge
import vsparta.termindex.embedded.weights as weights
from vsparta.termindex.embedded.index import EmbeddedIndex

VOCAB = 2000

# sha256 of the merged segment's files (name and bytes, sorted by name) after each compact(),
# with today's layout rule (runs dense when more than half of the block has the term; 646b956
# said 3/4) and libm's log1p for the bounds: {block_size: (first compact, second compact)}.
# (646b956's, numpy's AVX-512 log1p: 256: c89275ec..., e55d8c57...; 65,536: 6d5b41eb..., 0fadc34f...)
OLD_DIGESTS = {
    256: (
        "712baa8e3281e557a6762a4a78e2307f28921a1a4b9837b648bdf1b7bc1b2a17",
        "469b836e58c1b40427e53ecc208f8a9d650a7d8641591175e061e31c1ad8d438",
    ),
    65_536: (
        "057aec585d6718b5879137b73e63ad786c6ad08e8671964112b1e7e914e1785a",
        "1d7ae4df6ce1ed60ae420f636db5e919fb20bbeb3d0a68cf54fa0586db342d08",
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


def _other_cpus_log1p(weights):
    """numpy's log1p as a CPU with AVX-512 computes it: the last bit differs for ~5% of inputs
    (here every 16th value is moved one bit up)."""
    exact = np.log1p(np.asarray(weights, dtype=np.float64))  # weights.py passes arrays only
    return np.where(exact.view(np.uint64) % 16 == 0, np.nextafter(exact, np.inf), exact)


def test_a_segment_has_the_same_bytes_whichever_log1p_numpy_takes(tmp_path, monkeypatch):
    """The step and bounds a segment stores come from libm's log1p, not numpy's, whose SIMD path
    on CPUs with AVX-512 gives other last bits: 646b956's digests held there and nowhere else."""
    tables = [weights.saturation_table, weights.saturation_table64, weights.stored_saturation_table,
              weights.quant_tables]  # fmt: skip
    here = merged_digests(tmp_path / "here", 256)
    monkeypatch.setattr(weights, "saturate_array", _other_cpus_log1p)
    for table in tables:
        table.cache_clear()
    try:
        values, ok = weights._half_values()
        assert not np.array_equal(weights.saturation_table64()[ok], np.log1p(values[ok]))  # patched
        assert merged_digests(tmp_path / "there", 256) == here
    finally:
        for table in tables:
            table.cache_clear()


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
