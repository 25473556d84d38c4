"""`--resume` writes again a photo replaced or edited at the same path (its size or modification
time differ from the version the index holds, ``items.file_version``): in the index and in the
export, where its old line leaves the earlier part, so every id stays once; a run killed between
the two lines is repaired by the next resumed run; documents written before versions were kept
resume as before."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from PIL import Image

from vsparta.indexer.items import VERSION_KEY, Held, file_version, held_as, path_id, stamp
from vsparta.indexer.runner import IndexConfig, run_index
from vsparta.indexer.termdocs import TermDocExporter
from vsparta.termindex import open_index


def _config(images: Path, backend: str, root: Path, **kw) -> IndexConfig:
    return IndexConfig(
        input=images, backend=backend, export_jsonl=root / "export", workers=0, batch_size=2,
        progress=False, **kw,
    )  # fmt: skip


def _versions(backend: str, ids: list[str]) -> dict[str, str]:
    with open_index(backend) as index:
        return {i: m[VERSION_KEY] for i, m in index.existing_metadata(ids).items()}


def test_a_replaced_and_a_touched_photo_are_written_again_once_each(
    tmp_path: Path, empty_backend: str, write_images, colour_encoder, read_export
) -> None:
    backend = empty_backend
    images = tmp_path / "images"
    rels = write_images(images, 6)
    ids = [path_id(r) for r in rels]
    first = run_index(_config(images, backend, tmp_path), encoder=colour_encoder)
    assert (first.indexed, first.changed) == (6, 0)
    before = read_export(tmp_path / "export")
    assert _versions(backend, ids) == {i: file_version(images / r) for i, r in zip(ids, rels, strict=True)}

    replaced, touched = images / rels[0], images / rels[1]
    Image.new("RGB", (40, 30), (250, 10, 10)).save(replaced, format="JPEG")  # another photo, same path
    stat = touched.stat()
    os.utime(touched, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))  # edited in place
    again = run_index(_config(images, backend, tmp_path, resume=True), encoder=colour_encoder)
    assert (again.indexed, again.changed, again.skipped, again.failed) == (2, 2, 4, 0)
    assert "of those indexed, 2 written again: their file changed since" in again.lines()

    after = read_export(tmp_path / "export")  # fails on an id written twice
    assert set(after) == set(ids)
    assert after[ids[0]]["terms"] != before[ids[0]]["terms"]  # the new photo's document
    assert after[ids[1]]["terms"] == before[ids[1]]["terms"]  # same pixels, written again
    assert {i: after[i] for i in ids[2:]} == {i: before[i] for i in ids[2:]}
    assert _versions(backend, ids)[ids[0]] == file_version(replaced)
    assert _versions(backend, ids)[ids[1]] == file_version(touched)
    for part in (tmp_path / "export").glob("*.jsonl"):  # the old lines left their part
        lines = [json.loads(line) for line in part.read_text().splitlines()]
        assert len({r["id"] for r in lines}) == len(lines)

    third = run_index(_config(images, backend, tmp_path, resume=True), encoder=colour_encoder)
    assert (third.indexed, third.changed, third.skipped) == (0, 0, 6)


def _line(doc_id: str, version: str, weight: float) -> str:
    meta = {"image": "a.jpg", "image_root": "/photos", VERSION_KEY: version}
    return json.dumps({"id": doc_id, "terms": {"tok1": weight}, "metadata": meta}) + "\n"


def test_a_run_killed_between_the_new_line_and_the_old_ones_removal_is_repaired_on_resume(
    tmp_path: Path, read_export
) -> None:
    export = tmp_path / "export"
    export.mkdir()
    (export / "terms-S00000-00000.jsonl").write_text(_line("a", "10:1", 1.0) + _line("b", "10:1", 2.0))
    (export / "terms-S00000-00001.jsonl").write_text(_line("a", "12:2", 3.0))  # written again, then killed
    with pytest.raises(AssertionError, match="duplicate id a"):
        read_export(export)
    exporter = TermDocExporter(export, str, resume=True)
    exporter.close()
    assert read_export(export) == {
        "a": json.loads(_line("a", "12:2", 3.0)),
        "b": json.loads(_line("b", "10:1", 2.0)),
    }
    assert exporter.stamps["a"] == stamp(json.loads(_line("a", "12:2", 3.0))["metadata"])


@pytest.mark.parametrize(
    ("stored", "given", "held"),
    [
        ({"image": "a.jpg", VERSION_KEY: "10:1"}, {"image": "a.jpg", VERSION_KEY: "10:1"}, Held.AS_GIVEN),
        ({"image": "a.jpg", VERSION_KEY: "10:1"}, {"image": "a.jpg", VERSION_KEY: "10:2"}, Held.CHANGED),
        ({"image": "a.jpg", VERSION_KEY: "10:1"}, {"image": "a.jpg"}, Held.CHANGED),  # unreadable now
        ({"image": "a.jpg"}, {"image": "a.jpg", VERSION_KEY: "10:1"}, Held.AS_GIVEN),  # written before
        ({"image": "a.jpg", VERSION_KEY: "10:1"}, {"image": "b.jpg", VERSION_KEY: "10:2"}, Held.OTHER),
        ({"image": "a.jpg", "image_root": "/x"}, {"image": "a.jpg", "image_root": "/y"}, Held.AS_GIVEN),
    ],
)
def test_the_rule(stored: dict, given: dict, held: Held) -> None:
    assert held_as(stamp(stored), stamp(given)) is held
