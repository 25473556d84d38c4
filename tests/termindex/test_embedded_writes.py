"""Upserts, deletes, segments, merges, get/similar and refresh of the embedded engine."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from vsparta.termindex.base import TermDocument, heaviest_terms
from vsparta.termindex.embedded.index import EmbeddedIndex
from vsparta.termindex.errors import DocumentNotFound, IndexNotFound
from vsparta.termindex.oracle import BruteForceOracle, random_documents, round_like_embedded


def _doc(i: int, terms: dict[int, float], **meta) -> TermDocument:
    return TermDocument(f"img-{i}", terms, meta)


@pytest.fixture()
def index(tmp_path) -> EmbeddedIndex:
    return EmbeddedIndex(tmp_path / "idx", create=True, block_size=64)


def test_empty_index(index):
    assert index.count() == 0
    assert index.search({1: 1.0}) == []
    index.warmup()  # nothing to compile against yet: a no-op
    assert index.upsert([]) == 0 and index.delete([]) == 0
    index.compact()
    assert index.segment_count() == 0


def test_upsert_replaces_by_id(index):
    assert index.upsert([_doc(1, {5: 1.0, 6: 2.0}, v=1), _doc(2, {5: 0.5})]) == 2
    assert index.upsert([_doc(1, {7: 3.0}, v=2)]) == 1
    assert index.count() == 2
    assert index.get("img-1").weights == {7: 3.0}
    assert index.get("img-1").metadata == {"v": 2}
    assert [h.id for h in index.search({5: 1.0})] == ["img-2"]  # the old version is gone
    index.warmup()
    assert [h.id for h in index.search({7: 1.0})] == ["img-1"]


def test_duplicate_ids_in_one_batch_last_wins(index):
    assert index.upsert([_doc(1, {1: 1.0}), _doc(2, {1: 1.0}), _doc(1, {2: 1.0})]) == 2
    assert index.count() == 2
    assert index.get("img-1").weights == {2: 1.0}


def test_repeated_load_does_not_duplicate(index):
    docs = random_documents(300, vocab_size=200, seed=3)
    for _ in range(3):
        index.upsert(docs)
    assert index.count() == 300
    hits = index.search({t: 1.0 for t in range(200)}, k=1000)
    assert len(hits) == len({h.id for h in hits}) == 300


def test_delete(index):
    index.upsert([_doc(i, {1: float(i + 1)}) for i in range(10)])
    assert index.delete(["img-3", "img-4", "img-3", "missing"]) == 2
    assert index.delete(["img-3"]) == 0
    assert index.count() == 8
    with pytest.raises(DocumentNotFound):
        index.get("img-3")
    assert "img-3" not in {h.id for h in index.search({1: 1.0}, k=100)}
    index.upsert([_doc(3, {1: 100.0})])  # re-adding a deleted id works
    assert index.search({1: 1.0}, k=1)[0].id == "img-3"
    assert index.count() == 9


def test_deleting_every_document_of_a_segment_drops_it(index):
    index.upsert([_doc(i, {1: 1.0}) for i in range(5)])
    index.upsert([_doc(i, {1: 1.0}) for i in range(5, 10)])
    assert index.segment_count() == 2
    index.delete([f"img-{i}" for i in range(5)])
    assert index.segment_count() == 1
    assert index.count() == 5


def test_incremental_segments_compaction_and_cleanup(tmp_path):
    docs = random_documents(1200, vocab_size=300, seed=5)
    index = EmbeddedIndex(tmp_path / "idx", create=True, block_size=128, max_segments=100)
    for start in range(0, 1200, 200):
        index.upsert(docs[start : start + 200])
    replaced = [TermDocument(d.id, {7: 9.0}, {"replaced": True}) for d in docs[::7]]
    index.upsert(replaced)
    gone = [d.id for d in docs[1::9]]
    index.delete(gone)
    current = {d.id: d for d in docs}
    current.update({d.id: d for d in replaced})
    for g in gone:
        current.pop(g)
    oracle = BruteForceOracle(current.values(), round_weights=round_like_embedded)
    queries = [{t: 1.0, t + 1: 2.0} for t in range(0, 300, 13)] + [{7: 1.0}]
    before = [[(h.id, h.score) for h in index.search(q, k=10)] for q in queries]
    assert before == [[(h.id, h.score) for h in oracle.search(q, k=10)] for q in queries]
    assert index.segment_count() == 7
    index.compact()
    assert index.segment_count() == 1
    assert index.count() == len(current)
    after = [[(h.id, h.score) for h in index.search(q, k=10)] for q in queries]
    assert after == before
    # only the live segment, its files and the manifest/lock remain
    names = sorted(p.name for p in (tmp_path / "idx").iterdir())
    assert [n for n in names if n.startswith("seg-")] == [index._snap.segments[0].name]
    assert not [n for n in names if n.startswith(".")]
    seg_files = [p.name for p in index._snap.segments[0].path.iterdir()]
    assert not [f for f in seg_files if f.startswith("deletes-")]


def test_tiered_merge_bounds_segment_count(tmp_path):
    index = EmbeddedIndex(tmp_path / "idx", create=True, block_size=64, max_segments=4)
    for i in range(12):
        index.upsert([_doc(10 * i + j, {j: 1.0 + i}) for j in range(10)])
        assert index.segment_count() <= 4
    assert index.count() == 120
    assert index.search({3: 1.0}, k=1)[0].id == "img-113"


def test_get_returns_stored_weights_and_similar(tmp_path):
    docs = random_documents(500, vocab_size=150, seed=7)
    index = EmbeddedIndex(tmp_path / "idx", create=True, block_size=64)
    index.upsert(docs)
    d = docs[42]
    got = index.get(d.id)
    assert got.weights == {t: float(round_like_embedded(w)) for t, w in d.weights.items()}
    assert got.metadata == d.metadata
    similar = index.similar(d.id, k=5, n_terms=8)
    assert len(similar) == 5 and d.id not in {h.id for h in similar}
    top = dict(heaviest_terms(got.weights, 8))
    oracle = BruteForceOracle(docs, round_weights=round_like_embedded)
    want = [(h.id, h.score) for h in oracle.search(top, k=6) if h.id != d.id][:5]
    assert [(h.id, h.score) for h in similar] == want
    with pytest.raises(DocumentNotFound):
        index.get("nope")


def test_reopen_and_refresh(tmp_path):
    path = tmp_path / "idx"
    writer = EmbeddedIndex(path, create=True)
    writer.upsert([_doc(1, {1: 1.0})])
    reader = EmbeddedIndex(path, auto_refresh=False)
    assert reader.count() == 1
    gen = reader.generation
    writer.upsert([_doc(2, {1: 2.0})])
    assert reader.count() == 1  # still the old snapshot
    assert reader.refresh() is True
    assert reader.refresh() is False  # unchanged manifest: one stat, no reload
    assert reader.generation == gen + 1
    assert [h.id for h in reader.search({1: 1.0})] == ["img-2", "img-1"]
    auto = EmbeddedIndex(path)
    writer.delete(["img-2"])
    assert auto.count() == 1  # auto_refresh sees the commit at the next call
    writer.close()
    assert EmbeddedIndex(path).count() == 1  # survives reopening


def test_missing_index_and_bad_options(tmp_path):
    with pytest.raises(IndexNotFound):
        EmbeddedIndex(tmp_path / "nothing")
    with pytest.raises(ValueError, match="block_size"):
        EmbeddedIndex(tmp_path / "x", create=True, block_size=1000)
    EmbeddedIndex(tmp_path / "v", create=True, vocab_size=100)
    with pytest.raises(ValueError, match="vocab_size"):
        EmbeddedIndex(tmp_path / "v", vocab_size=200)


def test_writers_in_threads_serialize_on_the_lock(tmp_path):
    path = tmp_path / "idx"
    EmbeddedIndex(path, create=True)
    errors: list[BaseException] = []

    def write(w: int) -> None:
        try:
            mine = EmbeddedIndex(path, max_segments=3)  # its own lock file descriptor
            for b in range(5):
                mine.upsert([_doc(w * 1000 + b * 10 + j, {w: 1.0, 99: 1.0}) for j in range(10)])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    index = EmbeddedIndex(path)
    assert index.count() == 150
    assert len({h.id for h in index.search({99: 1.0}, k=1000)}) == 150


def test_upsert_arrays_counts_a_repeated_id_once(tmp_path):
    """The embedded engine's own count: a repeated id keeps its last row and is written once (what
    every engine's array writes must do is in test_engine_conformance_writes.py)."""
    import numpy as np

    b = EmbeddedIndex(tmp_path / "b", create=True, block_size=64)
    assert b.upsert_arrays(["x", "y", "x"], np.array([0, 1, 2, 3]), np.array([1, 1, 2]), np.ones(3)) == 2
    assert b.get("x").weights == {2: 1.0} and b.count() == 2


def test_postings_take_at_most_four_bytes_per_term(tmp_path):
    docs = random_documents(2000, vocab_size=500, terms_per_doc=(20, 120), seed=13)
    index = EmbeddedIndex(tmp_path / "idx", create=True, block_size=256)
    index.upsert(docs)
    stats = index.stats()
    assert stats["postings"] == sum(len(d.weights) for d in docs)
    seg = index._snap.segments[0].path
    files = ("ids.u8", "hdir.u8", "hend.u16", "weights.u16", "quant.u8")
    postings_bytes = sum((seg / f).stat().st_size for f in files)
    assert postings_bytes <= 4 * stats["postings"]
    assert stats["bytes_on_disk"] >= postings_bytes


def test_existing_ids_sees_live_documents_only(tmp_path: Path) -> None:
    with EmbeddedIndex(tmp_path / "ix", create=True) as index:
        index.upsert([TermDocument(f"d{i}", {1: 1.0 + i}) for i in range(5)])
        index.delete(["d2"])
        index.upsert([TermDocument("d9", {2: 0.5})])
        assert index.existing_ids(["d0", "d2", "d4", "d9", "nope"]) == {"d0", "d4", "d9"}


def test_every_array_a_kernel_reads_is_read_only_whatever_the_index_holds(tmp_path):
    """numba compiles a kernel once per argument type, writability included: an empty array (no
    split run, no deletion) or a fresh tombstone array must be read-only like the mapped ones, or
    each shape of index compiles its own kernels at its first search (seconds, mid-job)."""
    import dataclasses

    index = EmbeddedIndex(tmp_path / "idx", create=True, block_size=64)
    index.upsert([_doc(1, {1: 1.0}), _doc(2, {2: 0.5})])  # no split run: empty arrays
    index.upsert([_doc(3, {1: 2.0})])
    index.delete(["img-2"])  # a tombstone written in this process
    for seg in index._snap.segments:
        arrays = {f.name: getattr(seg, f.name) for f in dataclasses.fields(seg)}
        writable = [name for name, a in arrays.items() if hasattr(a, "flags") and a.flags.writeable]
        assert not writable, (seg.name, writable)
    reopened = EmbeddedIndex(tmp_path / "idx")
    for seg in reopened._snap.segments:
        assert not seg.deleted.flags.writeable and not any(a.flags.writeable for a in seg.postings)
