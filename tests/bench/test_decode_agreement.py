"""The draft-vs-full decode benchmark: its comparison arithmetic, and one real run on scene JPEGs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vsparta.bench.decode_agreement import agreement, main


def test_agreement_counts_what_differs() -> None:
    full = [{1: 2.0, 2: 1.0}, {5: 4.0, 6: 0.5, 7: 0.01}]
    draft = [{1: 2.0, 2: 1.0}, {5: 3.0, 6: 0.5, 8: 0.02}]
    a = agreement(full, draft)
    assert a["images_identical_sets"] == 1
    assert a["jaccard_min"] == pytest.approx(2 / 4)  # {5, 6} shared of {5, 6, 7, 8}
    assert a["jaccard_mean"] == pytest.approx((1 + 0.5) / 2)
    assert a["terms_on_one_side"] == 2 and a["largest_weight_on_one_side"] == pytest.approx(0.02)
    assert a["largest_shared_weight_change"] == pytest.approx(1.0)
    assert a["largest_change_relative_to_heaviest"] == pytest.approx(1.0 / 4.0)
    with pytest.raises(ValueError):
        agreement(full, draft[:1])  # the two decodes must cover the same images


def test_a_run_on_scene_jpegs_writes_both_decodes_figures(tmp_path: Path, capsys) -> None:
    import torch

    from vsparta.model.configuration import config_from_spec
    from vsparta.model.modeling import build_model
    from vsparta.scenes.shapes import generate_scenes

    torch.manual_seed(0)
    build_model(config_from_spec("tiny")).save_pretrained(tmp_path / "model")
    test = generate_scenes(
        tmp_path / "scenes", n_train=0, n_val=0, n_test=12, image_size=256, progress=False
    )["test"]
    out = tmp_path / "agreement.json"
    assert main(["--model", str(tmp_path / "model"), "--manifest", str(test), "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    jpegs = sum(json.loads(line)["image"].endswith(".jpg") for line in test.read_text().splitlines())
    assert 2 <= res["images"] == jpegs < 12  # PNG scenes are not compared: draft mode never touches them
    assert res["queries"] >= res["images"]
    assert res["pixel_mean_abs_diff"] > 0  # 256 px JPEGs for a 64 px model: decoded at 1/4 scale
    assert 0 < res["agreement"]["jaccard_mean"] <= 1
    assert set(res["full"]["recall"]) == set(res["draft"]["recall"]) == {"R@1", "R@5", "R@10"}
    assert res["command"].startswith("python -m bench.decode_agreement --model")
    assert "R@1" in capsys.readouterr().out


def test_a_missing_model_folder_is_one_sentence(tmp_path: Path, capsys) -> None:
    assert main(["--model", str(tmp_path / "nope"), "--manifest", str(tmp_path / "m.jsonl")]) == 2
    assert capsys.readouterr().err.strip() == f"error: {tmp_path / 'nope'} does not exist"
