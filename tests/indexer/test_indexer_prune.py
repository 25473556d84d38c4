"""`vsparta index --prune`: after a complete run, the documents of this shard whose id the input no
longer lists (a photo deleted, or moved inside the folder) leave the target and the export; a file
that fails to decode, a run that stops early, another shard's documents and a run without the flag
remove nothing, nor does a prune larger than --max-delete. On the embedded engine and real
Elasticsearch 7.17 and OpenSearch 2.19 nodes."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from vsparta.indexer.items import path_id, shard_of
from vsparta.indexer.runner import IndexConfig, IndexJob, PruneLimit, run_index
from vsparta.termindex import open_index


def _config(images: Path, backend: str, root: Path, **kw) -> IndexConfig:
    kw.setdefault("resume", True)
    return IndexConfig(
        input=images, backend=backend, export_jsonl=root / "export", workers=0, batch_size=2,
        progress=False, **kw,
    )  # fmt: skip


def _stored(backend: str) -> set[str]:
    with open_index(backend) as index:
        ids = set(index.iter_ids())
        assert index.count() == len(ids)
        return ids


def test_deleted_and_moved_photos_leave_the_index_and_the_export(
    tmp_path: Path, empty_backend: str, write_images, colour_encoder, read_export
) -> None:
    backend, images = empty_backend, tmp_path / "images"
    rels = write_images(images, 6)
    assert run_index(_config(images, backend, tmp_path), encoder=colour_encoder).indexed == 6
    ids = [path_id(r) for r in rels]

    (images / rels[0]).unlink()  # deleted
    moved = f"moved-{Path(rels[1]).name}"
    (images / rels[1]).rename(images / moved)  # moved inside the folder: another id
    listed = {*ids[2:], path_id(moved)}

    kept = run_index(_config(images, backend, tmp_path), encoder=colour_encoder)  # without --prune
    assert (kept.indexed, kept.skipped, kept.removed) == (1, 4, 0)
    assert _stored(backend) == set(ids) | {path_id(moved)}

    pruned = run_index(_config(images, backend, tmp_path, prune=True), encoder=colour_encoder)
    assert (pruned.indexed, pruned.skipped, pruned.removed, pruned.failed) == (0, 5, 2, 0)
    assert "removed 2 document(s) the input no longer lists (--prune)" in pruned.lines()
    assert pruned.figures()["removed"] == 2
    assert _stored(backend) == listed
    assert set(read_export(tmp_path / "export")) == listed  # fails on an id exported twice

    again = run_index(_config(images, backend, tmp_path, prune=True), encoder=colour_encoder)
    assert (again.indexed, again.skipped, again.removed) == (0, 5, 0)
    assert _stored(backend) == listed


def _indexed(tmp_path: Path, n: int, write_images, encoder) -> tuple[str, Path, list[str]]:
    """``n`` images indexed into an embedded index (and the export): its spec, the folder, the files."""
    backend, images = f"embedded:{tmp_path / 'idx'}", tmp_path / "images"
    rels = write_images(images, n)
    run_index(_config(images, backend, tmp_path), encoder=encoder)
    return backend, images, rels


def test_a_file_that_no_longer_decodes_keeps_its_document(
    tmp_path: Path, write_images, colour_encoder, read_export
) -> None:
    backend, images, rels = _indexed(tmp_path, 4, write_images, colour_encoder)
    (images / rels[0]).write_bytes(b"not a picture any more")  # changed, and now unreadable

    summary = run_index(_config(images, backend, tmp_path, prune=True), encoder=colour_encoder)
    assert (summary.failed, summary.removed, summary.skipped) == (1, 0, 3)
    assert _stored(backend) == {path_id(r) for r in rels}
    assert set(read_export(tmp_path / "export")) == {path_id(r) for r in rels}


def test_more_than_max_delete_removes_nothing_and_says_so(
    tmp_path: Path, write_images, colour_encoder, read_export
) -> None:
    """rsync's --max-delete: a folder half unmounted must not empty the index."""
    backend, images, rels = _indexed(tmp_path, 6, write_images, colour_encoder)
    for rel in rels[:3]:
        (images / rel).unlink()
    everything = {path_id(r) for r in rels}

    with pytest.raises(
        PruneLimit, match="--prune would remove 3 document\\(s\\) .* more than --max-delete 2: none"
    ):
        run_index(_config(images, backend, tmp_path, prune=True, max_delete=2), encoder=colour_encoder)
    assert _stored(backend) == everything
    assert set(read_export(tmp_path / "export")) == everything

    summary = run_index(_config(images, backend, tmp_path, prune=True, max_delete=3), encoder=colour_encoder)
    assert summary.removed == 3
    assert (
        _stored(backend)
        == set(read_export(tmp_path / "export"))
        == everything - {path_id(r) for r in rels[:3]}
    )


def test_max_delete_from_the_command_line(tmp_path: Path, write_images) -> None:
    import subprocess
    import sys

    images, backend = tmp_path / "images", f"embedded:{tmp_path / 'idx'}"
    rels = write_images(images, 3)
    index = [
        sys.executable,
        "-m",
        "vsparta.cli",
        "index",
        str(images),
        "--backend",
        backend,
        "--fake-encoder",
    ]
    assert subprocess.run([*index, "--no-progress"], capture_output=True).returncode == 0
    (images / rels[0]).unlink()

    proc = subprocess.run(
        [*index, "--resume", "--prune", "--max-delete", "0"], capture_output=True, text=True
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "--prune would remove 1 document(s)" in proc.stderr and "none was removed" in proc.stderr
    assert _stored(backend) == {path_id(r) for r in rels}
    alone = subprocess.run([*index, "--max-delete", "5"], capture_output=True, text=True)
    assert alone.returncode == 2 and "--max-delete limits --prune" in alone.stderr


class _StopsAfterOneBatch:
    """The colour encoder, asking the job to stop after its first batch (as SIGTERM does)."""

    def __init__(self, encoder, job_box: list[IndexJob]) -> None:
        self._encoder, self._box = encoder, job_box

    def start_pixels(self, pixels, top_n=None):
        self._box[0].stop.set()
        return self._encoder.start_pixels(pixels, top_n)

    def __getattr__(self, name: str):
        return getattr(self._encoder, name)


def test_a_run_that_stops_early_removes_nothing(tmp_path: Path, write_images, colour_encoder) -> None:
    backend, images, rels = _indexed(tmp_path, 8, write_images, colour_encoder)
    (images / rels[-1]).unlink()

    box: list[IndexJob] = []
    job = IndexJob(_config(images, backend, tmp_path, prune=True, resume=False),
                   encoder=_StopsAfterOneBatch(colour_encoder, box))  # fmt: skip
    box.append(job)
    summary = job.run()
    assert summary.removed == 0 and summary.indexed < 7
    assert _stored(backend) == {path_id(r) for r in rels}


def test_each_shard_prunes_only_its_own_ids(tmp_path: Path, write_images, colour_encoder) -> None:
    backend = f"embedded:{tmp_path / 'idx'}"
    images = tmp_path / "images"
    rels = write_images(images, 12)
    by_shard = {s: [r for r in rels if shard_of(path_id(r), 2) == s] for s in (0, 1)}
    assert by_shard[0] and by_shard[1]
    for s in (0, 1):
        run_index(_config(images, backend, tmp_path / f"s{s}", shard=s, num_shards=2), encoder=colour_encoder)
    gone = {s: by_shard[s][0] for s in (0, 1)}
    for rel in gone.values():
        (images / rel).unlink()

    first = run_index(
        _config(images, backend, tmp_path / "s0", shard=0, num_shards=2, prune=True), encoder=colour_encoder
    )
    assert first.removed == 1
    assert _stored(backend) == {path_id(r) for r in rels} - {path_id(gone[0])}
    second = run_index(
        _config(images, backend, tmp_path / "s1", shard=1, num_shards=2, prune=True), encoder=colour_encoder
    )
    assert second.removed == 1
    assert _stored(backend) == {path_id(r) for r in rels} - {path_id(g) for g in gone.values()}


@pytest.mark.elasticsearch
def test_elasticsearch_lists_ids_over_many_scroll_pages(es_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from vsparta.termindex import TermDocument
    from vsparta.termindex.elastic import index as elastic_index

    monkeypatch.setattr(elastic_index, "ID_PAGE", 3)
    spec = f"{es_url}/indexer-prune-pages-{uuid.uuid4().hex[:10]}"
    with open_index(spec, create=True) as index:
        try:
            index.upsert([TermDocument(f"d{i}", {1 + i % 5: 1.0}) for i in range(11)])
            index.delete(["d4"])
            assert sorted(index.iter_ids()) == sorted(f"d{i}" for i in range(11) if i != 4)
        finally:
            index.drop()  # type: ignore[attr-defined]
