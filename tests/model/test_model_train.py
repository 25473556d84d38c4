"""Training: the loss goes down, runs are reproducible, resume continues exactly, eval beats random."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import TINY

from vsparta.model.train import TrainOptions, latest_checkpoint, train


def _opts(manifest: Path, out: Path, **kw) -> TrainOptions:
    base = {
        "manifest": str(manifest),
        "out": str(out),
        "config": json.dumps(TINY),
        "epochs": 3,
        "batch_size": 8,
        "lr": 3e-3,
        "seed": 0,
        "device": "cpu",
        "progress": False,
    }
    base.update(kw)
    return TrainOptions(**base)


def test_short_run_lowers_loss_and_is_reproducible(toy_manifest: Path, tmp_path: Path) -> None:
    a = train(_opts(toy_manifest, tmp_path / "a", epochs=4))
    assert len(a.losses) == 4 * 2  # 16 images, batches of 8
    assert a.epoch_losses[-1] < a.epoch_losses[0] - 0.05
    assert (a.final_dir / "model.safetensors").exists() and (a.final_dir / "tokenizer.json").exists()
    assert latest_checkpoint(tmp_path / "a")[0] == 4
    b = train(_opts(toy_manifest, tmp_path / "b", epochs=4))
    assert b.losses == a.losses  # same seed, same loss curve (CPU)


def test_resume_matches_uninterrupted_run(toy_manifest: Path, tmp_path: Path) -> None:
    full = train(_opts(toy_manifest, tmp_path / "full", epochs=3))
    cut = tmp_path / "cut"
    train(_opts(toy_manifest, cut, epochs=3))
    shutil.rmtree(cut / "checkpoint-epoch-3")  # as if the run had died during epoch 3
    shutil.rmtree(cut / "final")
    assert latest_checkpoint(cut)[0] == 2
    resumed = train(_opts(toy_manifest, cut, epochs=3, resume=True))
    assert resumed.losses == full.losses
    a = (tmp_path / "full" / "final" / "model.safetensors").read_bytes()
    b = (tmp_path / "cut" / "final" / "model.safetensors").read_bytes()
    assert a == b


def test_dense_baseline_trains(toy_manifest: Path, tmp_path: Path) -> None:
    r = train(_opts(toy_manifest, tmp_path / "d", model="dense", epochs=6))
    assert r.epoch_losses[-1] < r.epoch_losses[0]


def test_bad_options(toy_manifest: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="--model"):
        train(_opts(toy_manifest, tmp_path / "x", model="clip"))
    with pytest.raises(ValueError, match="batch_size"):
        train(_opts(toy_manifest, tmp_path / "x", batch_size=1))


@pytest.mark.slow
def test_training_beats_random_recall_by_a_wide_margin(toy_manifest: Path, tmp_path: Path) -> None:
    """Train on 16 scenes (colour x shape x side), evaluate through the sparse index path."""
    from vsparta.core.manifest import read_manifest
    from vsparta.model.dense import load_model
    from vsparta.model.evaluate import evaluate

    r = train(_opts(toy_manifest, tmp_path / "vs", epochs=60, batch_size=16, lr=5e-3))
    model = load_model(r.final_dir)
    report = evaluate(read_manifest(toy_manifest), model, top_ns=[None], ndcg_queries=16, time_queries=8)
    vs, rnd = report.rows[0], report.rows[-1]
    assert vs["model"] == "VisualSparta" and rnd["model"] == "random"
    r5_vs, r5_rnd = vs["recall"]["16"]["R@5"], rnd["recall"]["16"]["R@5"]
    assert r5_vs >= 80.0 and r5_vs > r5_rnd + 40.0, (r5_vs, r5_rnd)
    assert vs["recall"]["16"]["R@1"] > 3 * max(rnd["recall"]["16"]["R@1"], 100 / 16)
    assert vs["ndcg@25"] > rnd["ndcg@25"]


def test_progress_in_a_redirected_log_is_plain_lines(toy_manifest: Path, tmp_path: Path, capsys) -> None:
    """stderr captured (not a terminal): the epoch bars may print lines, never carriage returns."""
    train(_opts(toy_manifest, tmp_path / "p", epochs=1, progress=True))
    err = capsys.readouterr().err
    assert "\r" not in err


@pytest.mark.parametrize("kind", ["visualsparta", "dense"])
def test_frozen_word_embeddings_keep_their_initial_values(
    toy_manifest: Path, tmp_path: Path, kind: str
) -> None:
    import torch

    from vsparta.model.dense import load_model
    from vsparta.model.modeling import build_model
    from vsparta.model.train import make_config

    overrides = {"freeze_word_embeddings": True}
    r = train(_opts(toy_manifest, tmp_path / "f", model=kind, epochs=2, overrides=overrides))
    assert r.epoch_losses[-1] < r.epoch_losses[0]  # everything else still learns
    torch.manual_seed(0)  # the run's seed: the same initial weights
    initial = build_model(
        make_config(kind, json.dumps(TINY), None, overrides), model_class=type(load_model(r.final_dir))
    )
    trained = load_model(r.final_dir)
    assert trained.config.freeze_word_embeddings is True  # a resumed run freezes them again
    before, after = initial.state_dict(), trained.state_dict()
    words = [k for k in before if k.endswith("word_embeddings.weight")]
    assert len(words) == (2 if kind == "dense" else 1)
    assert all(torch.equal(before[k], after[k]) for k in words)
    assert not all(torch.equal(before[k], after[k]) for k in before if k not in words)
