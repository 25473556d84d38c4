"""`vsparta calibrate` without `--index`: the calibration images are encoded by `vsparta index` into
a temporary index first (a real model on real image files), a file it cannot read is left out, and
the floors are the ones the two-step path (index, then calibrate with `--index`) writes."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest

from vsparta.cli import main
from vsparta.service.term_floors import FILE

WORDS = ("red", "blue", "green")


def _manifest(path: Path, images: list[str]) -> Path:
    lines = [
        {"id": Path(rel).stem, "image": f"images/{rel}", "captions": [f"a {WORDS[i % 3]} square"]}
        for i, rel in enumerate(images)
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def test_calibrate_encodes_the_images_itself_and_leaves_out_what_it_cannot_read(
    sharp_model: Path,
    write_images,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    good = write_images(tmp_path / "images", 12)
    (tmp_path / "images/broken.jpg").write_bytes(b"not a picture")
    one_step, two_step = tmp_path / "one", tmp_path / "two"
    for folder in (one_step, two_step):
        shutil.copytree(sharp_model, folder)

    with caplog.at_level("WARNING"):
        assert main(["calibrate", str(_manifest(tmp_path / "all.jsonl", [*good, "broken.jpg"])),
                     "--model", str(one_step), "--quantile", "0.5"]) == 0  # fmt: skip
    assert "1 of 13 calibration images could not be read" in caplog.text
    written = json.loads((one_step / FILE).read_text())
    assert written["calibration_images"] == 12
    assert {"red", "blue", "green", "square"} <= set(written["words"])
    assert not list(scratch.iterdir())  # the temporary index is gone

    manifest = _manifest(tmp_path / "good.jsonl", good)
    spec = f"embedded:{tmp_path / 'calibration-index'}"
    assert main(["index", str(manifest), "--backend", spec, "--model", str(two_step), "--no-progress"]) == 0
    assert main(["calibrate", str(manifest), "--model", str(two_step), "--index", spec]) == 0
    assert json.loads((two_step / FILE).read_text()) == written
    assert all("strong" in w and "null_rate" in w for w in written["words"].values())  # the presence test
    argv = ["calibrate", str(manifest), "--model", str(two_step), "--index", spec]
    assert main([*argv, "--presence-quantile", "none"]) == 0
    untested = json.loads((two_step / FILE).read_text())
    assert untested["rule"]["presence_quantile"] is None
    assert not any("strong" in w for w in untested["words"].values())
    assert main([*argv, "--related-share", "0.5"]) == 0
    assert json.loads((two_step / FILE).read_text())["rule"]["related_share"] == 0.5
    assert written["rule"]["unseen_quantile"] == 0.001 and written["unseen"]  # what the model writes
    assert all(v > 0 for v in written["unseen"].values())
    assert main([*argv, "--unseen-quantile", "none"]) == 0
    unseen_off = json.loads((two_step / FILE).read_text())
    assert unseen_off["rule"]["unseen_quantile"] is None and unseen_off["unseen"] == {}


def test_calibrate_refuses_an_index_holding_other_images_under_the_same_ids(
    sharp_model: Path, write_images, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two calibration sets whose ids overlap (each numbered from 0), indexed into one index: the
    second is skipped by --resume or replaces the first, and floors read from the wrong image's
    weights would be silently wrong; the captions the index stored tell them apart."""
    good = write_images(tmp_path / "images", 6)
    manifest = _manifest(tmp_path / "first.jsonl", good)
    spec = f"embedded:{tmp_path / 'calibration-index'}"
    argv = ["index", str(manifest), "--backend", spec, "--model", str(sharp_model), "--no-progress"]
    assert main(argv) == 0
    lines = [json.loads(line) for line in manifest.read_text().splitlines()]
    lines[3]["captions"] = ["a purple circle"]  # another image drawn under the same id
    other = tmp_path / "second.jsonl"
    other.write_text("".join(json.dumps(x) + "\n" for x in lines))
    capsys.readouterr()
    assert main(["calibrate", str(other), "--model", str(sharp_model), "--index", spec]) == 2
    err = capsys.readouterr().err
    assert err == (
        "vsparta calibrate: error: the index holds another image under the calibration image id "
        f"{lines[3]['id']!r} (its captions: 'a red square', the manifest's: 'a purple circle'): "
        "index the calibration images into an index of their own\n"
    )
    assert not (sharp_model / FILE).exists()  # nothing written
