"""The training recipe (model/recipe.py, model/augment.py): a rate per part of the model, warm-up and
decay, a frozen or fine-tuned pretrained stem, and fixed augmented views."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import LITE, TINY, draw_scene, make_toy_dataset

from vsparta.model.augment import Augmentation
from vsparta.model.configuration import VisualSpartaConfig
from vsparta.model.modeling import VisualSpartaModel, build_model
from vsparta.model.recipe import freeze, parameter_groups, warmup_then_decay
from vsparta.model.train import TrainOptions, make_config, train

MINILM = "sentence-transformers/all-MiniLM-L6-v2"


def _names(model, group) -> set[str]:
    ids = {id(p) for p in group["params"]}
    return {n for n, p in model.named_parameters() if id(p) in ids}


def test_parts_copied_from_the_text_model_get_their_own_rate() -> None:
    config = make_config("visualsparta", json.dumps({**TINY, "num_hidden_layers": 1}), MINILM)
    model = build_model(config, init=MINILM)
    groups = {g["name"]: g for g in parameter_groups(model, lr=1e-3, pretrained_lr=5e-5)}
    assert set(groups) == {"pretrained", "new"}
    assert groups["pretrained"]["lr"] == 5e-5 and groups["new"]["lr"] == 1e-3
    pretrained, new = _names(model, groups["pretrained"]), _names(model, groups["new"])
    assert "image.embeddings.word_embeddings.weight" in pretrained
    assert "image.encoder.layer.0.attention.self.query.weight" in pretrained
    assert {"image.region_proj.weight", "phi_bias"} <= new and any(n.startswith("image.stem.") for n in new)
    assert not pretrained & new and len(pretrained | new) == len(list(model.parameters()))
    # without rates of their own every part trains at lr, as before the groups existed
    assert [g["lr"] for g in parameter_groups(model, lr=2e-4)] == [2e-4, 2e-4]
    scratch = build_model(VisualSpartaConfig(**TINY))
    assert [g["name"] for g in parameter_groups(scratch, lr=5e-3, pretrained_lr=5e-5)] == ["new"]


def test_word_embeddings_reduced_from_a_text_model_are_its_only_pretrained_part() -> None:
    model = build_model(VisualSpartaConfig(**TINY, word_embeddings_from=MINILM))
    groups = {g["name"]: g for g in parameter_groups(model, lr=1e-3, pretrained_lr=2e-4)}
    assert _names(model, groups["pretrained"]) == {"image.embeddings.word_embeddings.weight"}
    assert groups["pretrained"]["lr"] == 2e-4
    assert "image.encoder.layer.0.attention.self.query.weight" in _names(model, groups["new"])


def test_a_pretrained_stem_is_frozen_unless_fine_tuned() -> None:
    frozen = build_model(VisualSpartaConfig(**LITE))
    assert freeze(frozen) is frozen.image.stem
    assert not any(p.requires_grad for p in frozen.image.stem.parameters())
    assert [g["name"] for g in parameter_groups(frozen, 1e-3, 1e-4, 1e-5)] == ["new"]
    tuned = build_model(VisualSpartaConfig(**LITE, freeze_stem=False))
    assert freeze(tuned) is None
    groups = {g["name"]: g for g in parameter_groups(tuned, 1e-3, stem_lr=1e-5)}
    assert groups["stem"]["lr"] == 1e-5 and all(
        n.startswith("image.stem.") for n in _names(tuned, groups["stem"])
    )
    assert freeze(build_model(VisualSpartaConfig(**TINY))) is None  # a scratch stem trains


def test_warm_up_then_decay_to_zero() -> None:
    factor = warmup_then_decay(total=10, warmup_steps=2)
    assert [round(factor(s), 3) for s in range(11)] == [
        0.5,
        1.0,
        1.0,
        0.875,
        0.75,
        0.625,
        0.5,
        0.375,
        0.25,
        0.125,
        0.0,
    ]


@pytest.mark.slow
def test_fine_tuning_the_stem_moves_its_weights_not_its_batch_norm_statistics(tmp_path: Path) -> None:
    manifest = make_toy_dataset(tmp_path / "toy")
    opts = TrainOptions(
        manifest=str(manifest), out=str(tmp_path / "run"), config=json.dumps({**LITE, "freeze_stem": False}),
        epochs=1, batch_size=8, lr=1e-3, stem_lr=1e-4, augment_views=2, progress=False,
    )  # fmt: skip
    torch.manual_seed(0)
    start = build_model(VisualSpartaConfig(**{**LITE, "freeze_stem": False})).image.stem.backbone
    tuned = VisualSpartaModel.from_pretrained(str(train(opts).final_dir)).image.stem.backbone
    assert not torch.equal(start._conv_stem.weight, tuned._conv_stem.weight)
    assert torch.equal(start._bn0.running_mean, tuned._bn0.running_mean)
    assert not (tmp_path / "run" / "feature-cache").exists()  # a stem that trains is never cached


def test_views_are_fixed_and_view_zero_is_the_image() -> None:
    image = draw_scene("red", "square", "left", size=64)
    aug = Augmentation(views=4, seed=3)
    assert aug.view(image, 7, 0) is image
    views = [np.asarray(aug.view(image, 7, v)) for v in range(1, 4)]
    assert all(v.shape == (64, 64, 3) for v in views)
    assert np.array_equal(views[0], np.asarray(aug.view(image, 7, 1)))  # a function of (seed, image, view)
    assert not np.array_equal(views[0], views[1]) and not np.array_equal(views[0], np.asarray(image))
    assert not np.array_equal(views[0], np.asarray(Augmentation(views=4, seed=4).view(image, 7, 1)))
    assert Augmentation(views=1).view(image, 7, 3) is image
    with pytest.raises(ValueError, match="views must be >= 1"):
        Augmentation(views=0)


def test_the_zoom_range_sets_how_far_views_crop_in_or_shrink() -> None:
    from PIL import Image

    red = Image.new("RGB", (64, 64), (220, 20, 20))

    def red_share(scale: tuple[float, float]) -> float:
        aug = Augmentation(views=2, scale=scale, rotation=0.0, brightness=0.0, contrast=0.0)
        pixels = np.asarray(aug.view(red, 5, 1)).astype(int)
        return float((np.abs(pixels - (220, 20, 20)).sum(axis=2) < 30).mean())

    assert red_share((2.0, 2.0)) == 1.0  # a crop of the picture fills the frame
    assert red_share((0.5, 0.5)) == pytest.approx(0.25, abs=0.02)  # the picture shrunk onto a flat colour


def test_a_bad_zoom_range_is_one_sentence_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    from vsparta.cli import main

    for bad, says in (("2,1", "0 < LOW <= HIGH"), ("0.5", "expected LOW,HIGH"), ("0,1", "0 < LOW")):
        with pytest.raises(SystemExit) as exit_:
            main(["train", "--augment-scale", bad, "--manifest", "m.jsonl", "--out", "o"])
        assert exit_.value.code == 2
        assert says in capsys.readouterr().err
