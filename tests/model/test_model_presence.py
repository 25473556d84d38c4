"""The presence penalty (``model.presence``): its labels, that it leaves the paper's loss alone at
weight 0, and that training with it lowers the weights of words an image's captions lack."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import TINY

from vsparta.core.manifest import read_manifest
from vsparta.model.configuration import VisualSpartaConfig
from vsparta.model.data import ImageStore, make_batch
from vsparta.model.modeling import VisualSpartaModel, build_model
from vsparta.model.presence import presence_labels, presence_penalty
from vsparta.model.train import TrainOptions, step_losses, train


def test_labels_are_the_words_of_each_images_own_captions() -> None:
    # image 0: captions [5 7] and [9]; image 1: caption [7 8]; 0 pads (mask False)
    ids = torch.tensor([[5, 7, 0], [9, 0, 0], [7, 8, 0]])
    mask = ids > 0
    vocab, present = presence_labels(ids, mask, torch.tensor([0, 0, 1]), images=2)
    assert vocab.tolist() == [5, 7, 8, 9]  # the pad id is no word
    assert present.tolist() == [[True, True, False, True], [False, True, True, False]]


def _batch(model: VisualSpartaModel, manifest: Path):
    store = ImageStore(read_manifest(manifest)[:8], model.config, model.query_tokenizer().tokenize)
    return make_batch(store, list(range(8)), 3, np.random.default_rng(0))


def test_weight_zero_is_the_papers_loss_and_a_weight_adds_the_penalty(toy_manifest: Path) -> None:
    torch.manual_seed(0)
    model = build_model(VisualSpartaConfig(**TINY)).train()
    batch = _batch(model, toy_manifest)
    cpu = torch.device("cpu")
    torch.manual_seed(1)
    ranking, total, _ = step_losses(model, batch, None, 0, cpu, False)
    assert torch.equal(ranking, total)
    weighted = build_model(VisualSpartaConfig(**TINY, presence_weight=2.0)).train()
    weighted.load_state_dict(model.state_dict())
    torch.manual_seed(1)
    ranking2, total2, _ = step_losses(weighted, batch, None, 0, cpu, False)
    torch.manual_seed(1)
    h, h_mask = weighted.encode_images(**batch.image_inputs())
    penalty = presence_penalty(weighted, h, h_mask, batch)
    assert penalty.item() > 0  # b > 0 at the start: every word has a weight everywhere
    assert total2.item() - ranking2.item() == pytest.approx(2.0 * penalty.item(), rel=1e-4)


def _absent_weight(model: VisualSpartaModel, manifest: Path) -> float:
    batch = _batch(model, manifest)
    model.eval()
    with torch.no_grad():
        h, h_mask = model.encode_images(**batch.image_inputs())
        vocab, present = presence_labels(batch.query_ids, batch.query_mask, batch.targets, h.shape[0])
        return model.vocab_phi(h, h_mask, ids=vocab)[~present].mean().item()


def test_training_with_it_lowers_the_weights_of_absent_words(toy_manifest: Path, tmp_path: Path) -> None:
    from vsparta.model.dense import load_model

    def opts(out: str, **kw) -> TrainOptions:
        base = {"manifest": str(toy_manifest), "out": str(tmp_path / out), "config": json.dumps(TINY)}
        base |= {"epochs": 3, "batch_size": 8, "lr": 3e-3, "seed": 0, "device": "cpu", "progress": False}
        return TrainOptions(**(base | kw))

    plain = load_model(train(opts("plain")).final_dir)
    present = load_model(train(opts("presence", overrides={"presence_weight": 1.0})).final_dir)
    assert present.config.presence_weight == 1.0  # saved in the model's config
    before, after = _absent_weight(plain, toy_manifest), _absent_weight(present, toy_manifest)
    assert after < 0.5 * before, (before, after)


def test_the_margin_holds_up_the_words_an_image_uses(toy_manifest: Path) -> None:
    torch.manual_seed(0)
    absent_only = build_model(VisualSpartaConfig(**TINY, presence_weight=1.0, presence_margin=0.0)).eval()
    high_margin = build_model(VisualSpartaConfig(**TINY, presence_weight=1.0, presence_margin=50.0)).eval()
    high_margin.load_state_dict(absent_only.state_dict())
    batch = _batch(absent_only, toy_manifest)
    with torch.no_grad():
        h, h_mask = absent_only.encode_images(**batch.image_inputs())
        plain = presence_penalty(absent_only, h, h_mask, batch).item()
        held = presence_penalty(high_margin, h, h_mask, batch).item()
    assert plain == pytest.approx(_absent_weight(absent_only, toy_manifest), rel=1e-5)
    assert held > plain + 40  # every used word is far below a margin of 50
