"""The indexing benchmark runs end to end on a tiny input and reports what each figure names."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from vsparta.bench import indexing


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    indexing.add_arguments(parser)
    return parser.parse_args(list(argv))


@pytest.mark.slow
def test_indexing_benchmark_reports_every_stage(tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    args = _args(
        "--images", "6", "--size", "80x60", "--models", "tiny", "--fake-encoder", "--fake-image-size", "32",
        "--engines", "embedded", "--write-docs", "40", "--terms-per-doc", "30", "--write-batch", "16",
        "--batch-size", "4", "--top-n", "50", "--json", str(out), "--workdir", str(tmp_path / "work"),
    )  # fmt: skip
    assert indexing.run(args) == 0
    figures = json.loads(out.read_text())
    tiny = figures["models"]["tiny"]
    job = tiny["pipeline"]
    # every image went through the whole job once, and the figures describe that job
    assert job["indexed"] == 6 and job["failed"] == 0 and job["decode_workers"] == 1
    assert job["images_per_s"] == pytest.approx(6 / job["seconds"])
    for stage in ("decode", "encode", "write"):
        assert 0 < job["busy_shares"][stage] <= 1.0, stage
    assert job["busy_shares"]["gpu"] is None  # CPU: no GPU figure rather than a made-up one
    assert tiny["mean_terms_per_image"] == 50  # the top-n cut the benchmark asked for
    fake = figures["fake_encoder"]
    assert fake["pipeline"]["indexed"] == 6
    assert fake["pipeline_vs_decode"] == pytest.approx(
        fake["pipeline"]["images_per_s"] / fake["decode_fast_images_per_s"]
    )
    from vsparta.termindex import open_index

    with open_index(f"embedded:{tmp_path / 'work' / 'pipeline-fake'}") as index:
        assert index.count() == 6  # the job really built the index it measured
    assert figures["writes"]["embedded"]["docs"] == 40
    assert figures["command"].startswith("vsparta bench indexing")


def test_make_images_writes_a_reusable_jpeg_set(tmp_path: Path) -> None:
    from PIL import Image

    assert indexing.run(_args("--make-images", "3", "--size", "40x30", "--workdir", str(tmp_path))) == 0
    files = sorted((tmp_path / "images").glob("*.jpg"))
    assert len(files) == 3 and all(Image.open(f).size == (40, 30) for f in files)
    stamp = [f.stat().st_mtime_ns for f in files]
    assert indexing.image_set(tmp_path, 3, (40, 30)) == files  # reused, not rewritten
    assert [f.stat().st_mtime_ns for f in files] == stamp
    with pytest.raises(SystemExit):
        _args("--size", "40by30")
