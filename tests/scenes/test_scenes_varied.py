"""The varied training look: the seen texture families, half of them vivid; every other split as
it was, so a model trained on it is measured on the same test and shift scenes as any other."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from vsparta.cli import main
from vsparta.core.manifest import read_manifest
from vsparta.scenes.object_render import SEEN
from vsparta.scenes.object_varied import VARIED, VIVID_SHARE
from vsparta.scenes.objects import generate_object_scenes

SEEN_TEXTURES = {"stripes", "checks", "blotches", "speckles"}
COUNTS = {"train": 24, "val": 6, "test": 6, "shift": 6}


def _spread(pixels: np.ndarray) -> float:
    """How far a background's pixels lie from its mean colour (contrast and colour together)."""
    flat = pixels.reshape(-1, 3)
    return float(np.linalg.norm(flat - flat.mean(axis=0), axis=1).mean())


def test_half_the_backgrounds_are_vivid_in_the_seen_families() -> None:
    rng = np.random.default_rng(0)
    seen = [SEEN.background(rng, 48) for _ in range(300)]
    varied = [VARIED.background(rng, 48) for _ in range(600)]
    assert {texture for _, texture, _ in varied} == SEEN_TEXTURES  # the captions' words, never a new kind
    most_seen = max(_spread(pixels) for pixels, _, _ in seen)
    beyond = np.mean([_spread(pixels) > most_seen for pixels, _, _ in varied])
    assert VIVID_SHARE - 0.15 < beyond <= VIVID_SHARE + 0.05  # a few vivid draws are two close colours
    for pixels, _, colour in varied:
        assert pixels.shape == (48, 48, 3) and pixels.min() >= 0 and pixels.max() <= 255
        assert len(colour) == 3 and all(0 <= c <= 255 for c in colour)


def test_only_the_training_split_changes(tmp_path: Path) -> None:
    plain = generate_object_scenes(tmp_path / "seen", COUNTS, image_size=64, seed=2, progress=False)
    varied = generate_object_scenes(
        tmp_path / "varied", COUNTS, image_size=64, seed=2, progress=False, train_look=VARIED
    )
    for split in ("val", "test", "shift"):
        a, b = read_manifest(plain[split]), read_manifest(varied[split])
        assert [r.image.read_bytes() for r in a] == [r.image.read_bytes() for r in b]
        assert [r.captions for r in a] == [r.captions for r in b]
    train = read_manifest(varied["train"])
    assert {r.metadata["style"] for r in train} == {"varied"}
    assert {r.metadata["background"]["texture"] for r in train} <= SEEN_TEXTURES
    seen_train = read_manifest(plain["train"])
    for a, b in zip(seen_train, train, strict=True):  # the same objects, drawn on another background
        assert [o["name"] for o in a.metadata["objects"]] == [o["name"] for o in b.metadata["objects"]]
        assert a.image.read_bytes() != b.image.read_bytes()


def test_the_command_draws_the_varied_look(tmp_path: Path) -> None:
    argv = ["scenes", "--kind", "objects", "--out", str(tmp_path), "--size", "64", "--train", "8"]
    argv += ["--val", "2", "--test", "2", "--heldout-words", "2", "--heldout-objects", "2"]
    assert main([*argv, "--train-look", "varied", "--no-progress", "--no-vocabulary"]) == 0
    assert {r.metadata["style"] for r in read_manifest(tmp_path / "train.jsonl")} == {"varied"}
    assert {r.metadata["style"] for r in read_manifest(tmp_path / "test.jsonl")} == {"seen"}


def test_an_unknown_look_is_refused_by_the_parser(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["scenes", "--kind", "objects", "--out", str(tmp_path), "--train-look", "gradient"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'gradient' (choose from 'seen', 'varied')" in capsys.readouterr().err
