"""``bench/index_scales.py``: a row per set of input sizes, on every pool of the object benchmark,
with the ceilings, the shift split's share of test R@1 and the set validation picks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vsparta.bench.index_scales import POOLS, main
from vsparta.model.configuration import VisualSpartaConfig
from vsparta.model.modeling import build_model
from vsparta.scenes.objects import generate_object_scenes

LITE = {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 64}
LITE |= {"stem": "efficientnet_lite0", "stem_weights": "none", "image_size": 64, "grid_size": 2}


def test_a_row_per_set_of_sizes_on_every_pool(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    build_model(VisualSpartaConfig(**LITE)).save_pretrained(tmp_path / "m")
    data = tmp_path / "scenes"
    generate_object_scenes(data, {p: 10 for p in POOLS}, image_size=48, seed=0, progress=False)
    out = tmp_path / "out"
    argv = ["--model", str(tmp_path / "m"), "--data", str(data), "--scales", "64", "--scales", "64,96"]
    assert main([*argv, "--out-dir", str(out), "--regions", "pooled", "native"]) == 0
    result = json.loads((out / "index-scales.json").read_text())
    sets = [(r["regions"], r["scales"]) for r in result["rows"]]
    assert sets == [("pooled", [64]), ("pooled", [64, 96]), ("native", [64]), ("native", [64, 96])]
    assert result["rows"][0]["recall"] == result["rows"][2]["recall"]  # image_size alone: the same regions
    assert list(result["ceilings"]) == list(POOLS) and all(0 < c <= 100 for c in result["ceilings"].values())
    for row in result["rows"]:
        assert set(row["recall"]) == set(POOLS)
        assert row["seconds_per_image"] > 0 and row["terms_per_image"] > 0
    assert result["picked_by_validation"] in ([64], [64, 96]) and result["picked_regions"] in (
        "pooled",
        "native",
    )
    table = (out / "index-scales.md").read_text()
    assert table.count("(picked)") == 1 and "| ambiguity ceiling (R@1) |" in table
    row = next(line for line in table.splitlines() if line.startswith("| 64,96 (native)"))
    assert len(row.strip("|").split("|")) == len(POOLS) + 4  # sizes, pools, ratio, terms, seconds
    with pytest.raises(SystemExit):
        main(["--model", str(tmp_path / "m"), "--data", str(tmp_path), "--scales", "64"])
    assert "lacks val.jsonl" in capsys.readouterr().err
