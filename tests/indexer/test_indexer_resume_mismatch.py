"""`--resume` skips a document only when the target holds it as this input gives it: another input's
document under one of the ids (two manifests numbering their images alike) stops the job in one
sentence, exit 2, with nothing lost; a folder moved elsewhere still resumes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from vsparta.cli import main
from vsparta.core.manifest import read_manifest
from vsparta.indexer.runner import IndexConfig, ResumeMismatch, run_index
from vsparta.termindex import open_index

CAPTIONS = [f"a picture of colour {i}" for i in range(6)]


def _manifest(path: Path, rels: list[str], captions: list[str]) -> Path:
    lines = [
        json.dumps({"id": f"pic-{i:02d}", "image": f"images/{rel}", "captions": [caption]})
        for i, (rel, caption) in enumerate(zip(rels, captions, strict=True))
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def _config(manifest: Path, root: Path, **kw) -> IndexConfig:
    return IndexConfig(
        input=manifest, backend=f"embedded:{root / 'idx'}", export_jsonl=root / "export", workers=0,
        batch_size=2, progress=False, **kw,
    )  # fmt: skip


def _captions(root: Path) -> dict[str, list[str]]:
    with open_index(f"embedded:{root / 'idx'}") as index:
        return {doc_id: list(m["captions"]) for doc_id, m in index.existing_metadata(_ids()).items()}


def _ids() -> list[str]:
    return [f"pic-{i:02d}" for i in range(6)]


def test_another_inputs_document_under_an_id_stops_the_resume_and_nothing_is_lost(
    tmp_path: Path, write_images, colour_encoder, read_export
) -> None:
    rels = write_images(tmp_path / "images", 6)
    first = _manifest(tmp_path / "first.jsonl", rels, CAPTIONS)
    assert run_index(_config(first, tmp_path), encoder=colour_encoder).indexed == 6
    export = read_export(tmp_path / "export")
    # The same ids; the last two name each other's image, with other captions.
    second = _manifest(tmp_path / "second.jsonl", [*rels[:4], rels[5], rels[4]], [*CAPTIONS[:4], "x", "y"])
    with pytest.raises(ResumeMismatch) as refused:
        run_index(_config(second, tmp_path, resume=True), encoder=colour_encoder)
    assert str(refused.value) == (
        f"--resume: the target holds another document under the id 'pic-04' of {second} "
        f"({read_manifest(second)[4].image}; its metadata differs from this input's, and 1 more id in the "
        "same stretch): index this input into a target of its own, or rerun without --resume to "
        "replace them"
    )
    assert _captions(tmp_path) == {f"pic-{i:02d}": [c] for i, c in enumerate(CAPTIONS)}  # the first's
    assert read_export(tmp_path / "export") == export
    # The first input resumes with nothing to do; so does the same data set moved elsewhere.
    again = run_index(_config(first, tmp_path, resume=True), encoder=colour_encoder)
    assert (again.skipped, again.indexed) == (6, 0)
    moved = tmp_path / "moved"
    shutil.copytree(tmp_path / "images", moved / "images")
    shutil.copy(first, moved / "first.jsonl")
    again = run_index(_config(moved / "first.jsonl", tmp_path, resume=True), encoder=colour_encoder)
    assert (again.skipped, again.indexed) == (6, 0)
    # Without --resume the second input replaces the documents, in the index and the export.
    assert run_index(_config(second, tmp_path), encoder=colour_encoder).indexed == 6
    assert _captions(tmp_path)["pic-05"] == ["y"]
    assert read_export(tmp_path / "export")["pic-05"]["metadata"]["captions"] == ["y"]


def test_the_command_says_it_in_one_sentence(
    tmp_path: Path, write_images, capsys: pytest.CaptureFixture[str]
) -> None:
    rels = write_images(tmp_path / "images", 6)
    first = _manifest(tmp_path / "first.jsonl", rels, CAPTIONS)
    second = _manifest(tmp_path / "second.jsonl", rels, [*CAPTIONS[:2], "another caption", *CAPTIONS[3:]])
    common = [
        "--backend",
        f"embedded:{tmp_path / 'idx'}",
        "--fake-encoder",
        "--workers",
        "0",
        "--no-progress",
    ]
    assert main(["index", str(first), *common]) == 0
    capsys.readouterr()
    assert main(["index", str(second), *common, "--resume"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        "vsparta index: error: --resume: the target holds another document under the id 'pic-02'"
    )
    assert err.count("\n") == 1 and "Traceback" not in err
    assert _captions(tmp_path)["pic-02"] == [CAPTIONS[2]]
