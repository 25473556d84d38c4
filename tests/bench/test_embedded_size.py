"""Bytes per image of the embedded engine for a model-shaped corpus, loaded as the indexer loads."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from vsparta.bench.embedded_size import main
from vsparta.bench.model_shaped import save_profile


def test_sizes_come_from_a_one_segment_index_of_the_sampled_images(tmp_path: Path, capsys) -> None:
    df = np.array([0.9, 0.6, 0.3, 0.1, 0.05] * 40)  # 200 terms, 78 per image on average
    profile = {
        "term_ids": np.arange(0, 2000, 10, dtype=np.int32),
        "df": df,
        "mu": np.full(200, -1.0, dtype=np.float32),
        "sigma": np.full(200, 0.5, dtype=np.float32),
        "max": np.full(200, 3.0, dtype=np.float32),
        "vocab_size": np.array(30522),
    }
    save_profile(profile, tmp_path / "p.npz")
    out = tmp_path / "size.json"
    args = [
        str(tmp_path / "p.npz"),
        "--docs",
        "3000",
        "--cache-dir",
        str(tmp_path / "cache"),
        "--json",
        str(out),
    ]
    assert main(args) == 0
    res = json.loads(out.read_text())
    assert res["images"] == 3000 and res["segments"] == 1
    assert res["terms_per_image"] == pytest.approx(df.sum(), rel=0.05)
    # every stored term costs something, and an image more than its terms (ids, offsets)
    assert res["bytes_per_image"] > res["terms_per_image"] * 1.0
    assert res["bytes_per_term"] == pytest.approx(res["bytes_per_image"] / res["terms_per_image"], rel=1e-6)
    assert "bytes/image" in capsys.readouterr().out


def test_a_missing_profile_is_one_sentence(tmp_path: Path, capsys) -> None:
    assert main([str(tmp_path / "none.npz")]) == 2
    assert capsys.readouterr().err.strip() == f"error: {tmp_path / 'none.npz'} does not exist"
