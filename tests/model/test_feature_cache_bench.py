"""``bench/feature_cache.py``: a step with the frozen stem on the pixels against a step reading its
feature cache, on the same batches; the report's figures follow from the measured ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import LITE, TINY, make_toy_dataset

from vsparta.bench.feature_cache import main


def test_the_report_compares_both_kinds_of_step(tmp_path: Path) -> None:
    manifest = make_toy_dataset(tmp_path / "toy")
    out = tmp_path / "out"
    args = ["--manifest", str(manifest), "--config", json.dumps(LITE), "--images", "16", "--steps", "3"]
    assert (
        main([*args, "--batch-size", "8", "--train-images", "800", "--epochs", "4", "--out-dir", str(out)])
        == 0
    )
    r = json.loads((out / "feature-cache.json").read_text())
    assert r["images_measured"] == 16 and set(r["step_s"]) == {"stem", "cache", "fine-tune"}
    assert r["epoch_s"]["cache"] == pytest.approx(r["step_s"]["cache"] * 100)  # 800 images / 8
    run_cached = r["cache_build_s"] + 4 * r["epoch_s"]["cache"]
    assert r["speedup_over_run"] == pytest.approx(4 * r["epoch_s"]["stem"] / run_cached)
    assert "An epoch from the cache is" in (out / "feature-cache.md").read_text()


def test_a_stem_that_trains_is_refused_in_one_sentence(tmp_path: Path, capsys) -> None:
    manifest = make_toy_dataset(tmp_path / "toy")
    assert main(["--manifest", str(manifest), "--config", json.dumps(TINY)]) == 2
    assert "only a frozen stem is cached" in capsys.readouterr().err
