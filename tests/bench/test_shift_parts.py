"""``bench/shift_parts.py``: the shift split with one change at a time, each pool with its ceiling."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from vsparta.bench.shift_parts import CHANGES, main
from vsparta.core.manifest import read_manifest
from vsparta.model.configuration import VisualSpartaConfig
from vsparta.model.modeling import build_model

TINY = {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 64}
TINY |= {"image_size": 32, "grid_size": 4, "stem_channels": [8], "region_feature_dim": 16}


def test_one_pool_per_change_and_a_row_per_model(tmp_path: Path) -> None:
    build_model(VisualSpartaConfig(**TINY)).save_pretrained(tmp_path / "m")
    out, cache = tmp_path / "out", tmp_path / "cache"
    argv = ["--model", f"tiny={tmp_path / 'm'}", "--size", "48", "--images", "12", "--cache-dir", str(cache)]
    assert main([*argv, "--out-dir", str(out)]) == 0
    result = json.loads((out / "shift-parts.json").read_text())
    names = ["test", "shift", *(f"only {c}" for c in CHANGES)]
    assert list(result["ceilings"]) == names and list(result["rows"][0]["r1"]) == names
    folder = cache / "parts-48-12-0"
    backgrounds = {
        name: {r.metadata["background"]["texture"] for r in read_manifest(folder / name / "shift.jsonl")}
        for name in ("shift", "only-background", "only-sizes")
    }
    assert backgrounds["shift"] <= {"gradient", "noise"} and backgrounds["only-background"] <= {
        "gradient",
        "noise",
    }
    assert backgrounds["only-sizes"] <= {"stripes", "checks", "blotches", "speckles"}  # as in training
    frames = [r.captions for r in read_manifest(folder / "only-templates" / "shift.jsonl")]
    seen = [r.captions for r in read_manifest(folder / "only-sizes" / "shift.jsonl")]
    assert any(
        "can be seen here" in c or "snapshot" in c or "view containing" in c for cs in frames for c in cs
    )
    assert not any("can be seen here" in c for cs in seen for c in cs)
    assert all(np.isfinite(v) for v in result["rows"][0]["r1"].values())
    assert "| ambiguity ceiling |" in (out / "shift-parts.md").read_text()
