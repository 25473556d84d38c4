"""Learned sparsity: the regularizer's values and gradient, its effect in training, the config fields,
φ in float32 under autocast, and the one rule for ids a query never contains."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from conftest import TINY

from vsparta.core.manifest import read_manifest
from vsparta.model.configuration import VisualSpartaConfig
from vsparta.model.modeling import VisualSpartaModel, build_model
from vsparta.model.sparsity import SparsityRegularizer, sparsity_penalty, warmup_factor
from vsparta.model.train import TrainOptions, train


def test_penalty_formulas() -> None:
    phi = torch.tensor([[1.0, 0.0, 2.0], [3.0, 0.0, 0.0]])
    # FLOPS: means over images are [2, 0, 1] -> 4 + 0 + 1; L1: row sums [3, 3] -> mean 3
    assert sparsity_penalty(phi, "flops").item() == pytest.approx(5.0)
    assert sparsity_penalty(phi, "l1").item() == pytest.approx(3.0)
    with pytest.raises(ValueError, match="unknown sparsity loss"):
        sparsity_penalty(phi, "l0")
    assert warmup_factor(0, 100, 0.1) == pytest.approx(0.01)  # (1/10)²
    assert warmup_factor(4, 100, 0.1) == pytest.approx(0.25)
    assert warmup_factor(10, 100, 0.1) == 1.0 and warmup_factor(0, 100, 0.0) == 1.0


def _toy_batch(model: VisualSpartaModel, manifest: Path):
    from vsparta.model.data import ImageStore, make_batch

    records = read_manifest(manifest)[:8]
    store = ImageStore(records, model.config, model.query_tokenizer().tokenize)
    return make_batch(store, list(range(8)), 3, __import__("numpy").random.default_rng(0))


def test_regularizer_gradient_reaches_ids_no_caption_contains(toy_manifest: Path) -> None:
    torch.manual_seed(0)
    model = build_model(VisualSpartaConfig(**TINY, sparsity_weight=1.0, sparsity_warmup=0.0)).train()
    batch = _toy_batch(model, toy_manifest)
    caption_ids = set(batch.query_ids[batch.query_mask].tolist())
    never = torch.tensor(sorted(set(range(1000, 29000)) - caption_ids))
    emb = model.word_embeddings.weight

    h, h_mask = model.encode_images(pixel_values=batch.pixel_values)
    ranking = F.cross_entropy(model.score(batch.query_ids, batch.query_mask, h, h_mask), batch.targets)
    (grad_rank,) = torch.autograd.grad(ranking, emb, retain_graph=True)
    assert grad_rank[never].abs().sum().item() == 0.0  # Eq. 13 alone never touches them

    reg = SparsityRegularizer.for_model(model, total_steps=10, device=torch.device("cpu"))
    assert reg is not None
    penalty, positive = reg(model.vocab_phi(h, h_mask), step=0)
    assert positive.item() > 10_000  # near-zero embeddings + b > 0: nearly every id starts positive
    (grad_reg,) = torch.autograd.grad(penalty, emb)
    reached = (grad_reg[never].abs().sum(dim=1) > 0).float().mean().item()
    assert reached > 0.99, reached


def _positive_terms(model: VisualSpartaModel, manifest: Path) -> float:
    batch = _toy_batch(model, manifest)
    model.eval()
    with torch.no_grad():
        h, mask = model.encode_images(pixel_values=batch.pixel_values)
        phi = model.term_weights(h, mask)
    phi[:, model.non_query_ids()] = 0
    return (phi > 0).sum(dim=1).float().mean().item()


def _opts(manifest: Path, out: Path, **kw) -> TrainOptions:
    base = {"manifest": str(manifest), "out": str(out), "config": json.dumps(TINY), "epochs": 3}
    base |= {"batch_size": 8, "lr": 3e-3, "seed": 0, "device": "cpu", "progress": False}
    return TrainOptions(**(base | kw))


@pytest.mark.parametrize("loss", ["flops", "l1"])
def test_regularizer_lowers_positive_terms_in_a_few_steps(
    toy_manifest: Path, tmp_path: Path, loss: str
) -> None:
    from vsparta.model.dense import load_model

    weight = {"flops": 1e-2, "l1": 1e-3}[loss]
    plain = train(_opts(toy_manifest, tmp_path / "plain"))
    sparse = train(
        _opts(
            toy_manifest,
            tmp_path / "sparse",
            overrides={"sparsity_weight": weight, "sparsity_loss": loss, "sparsity_warmup": 0.0},
        )
    )
    n_plain = _positive_terms(load_model(plain.final_dir), toy_manifest)
    n_sparse = _positive_terms(load_model(sparse.final_dir), toy_manifest)
    assert n_plain > 20_000  # the paper recipe leaves the never-seen ids on
    assert n_sparse < 0.5 * n_plain, (n_plain, n_sparse)
    assert len(sparse.epoch_positive_terms) == 3 and sparse.epoch_positive_terms[-1] < 0.5 * n_plain
    assert plain.epoch_positive_terms == []  # weight 0: no regularizer at all


def test_vocabulary_sampling_estimates_the_whole_vocabulary() -> None:
    config = VisualSpartaConfig(**TINY, sparsity_weight=1.0, sparsity_warmup=0.0, sparsity_vocab=100)
    reg = SparsityRegularizer(config, total_steps=1, device=torch.device("cpu"))
    phi = torch.ones(4, config.vocab_size)
    ids = reg.sample_ids(torch.device("cpu"))
    assert ids is not None and len(set(ids.tolist())) == 100
    full = sparsity_penalty(phi, "flops").item()
    penalty, positive = reg(phi[:, ids], step=0)
    assert penalty.item() == pytest.approx(full) and positive.item() == pytest.approx(config.vocab_size)


def test_target_mode_raises_the_weight_while_above_target() -> None:
    config = VisualSpartaConfig(**TINY, sparsity_weight=1.0, sparsity_target=10.0)
    reg = SparsityRegularizer(config, total_steps=1, device=torch.device("cpu"))
    phi = torch.ones(2, 1000)  # 1000 positive terms per image, target 10
    for _ in range(5):
        reg(phi, step=0)
    high = float(reg.scale)
    assert high > 1.2
    for _ in range(5):
        reg(torch.zeros(2, 1000), step=0)  # below target: the weight comes down again
    assert float(reg.scale) < high
    restored = SparsityRegularizer(config, total_steps=1, device=torch.device("cpu"))
    restored.load_state_dict(reg.state_dict())
    assert float(restored.scale) == pytest.approx(float(reg.scale))


def test_new_fields_round_trip_and_old_checkpoints_load(tmp_path: Path) -> None:
    torch.manual_seed(0)
    fields = {"sparsity_weight": 3e-3, "sparsity_loss": "l1", "sparsity_target": 200.0, "phi_term_bias": True}
    model = build_model(VisualSpartaConfig(**TINY, **fields))
    with torch.no_grad():
        model.term_bias.uniform_(-0.5, 0.5)
    model.save_pretrained(tmp_path / "new")
    loaded = VisualSpartaModel.from_pretrained(str(tmp_path / "new"))
    assert {k: getattr(loaded.config, k) for k in fields} == fields
    assert torch.equal(loaded.term_bias, model.term_bias)

    old = build_model(VisualSpartaConfig(**TINY))
    old.save_pretrained(tmp_path / "old")
    cfg_file = tmp_path / "old" / "config.json"
    cfg = json.loads(cfg_file.read_text())
    for key in [k for k in cfg if k.startswith("sparsity_") or k == "phi_term_bias"]:
        del cfg[key]  # as written before these fields existed
    cfg_file.write_text(json.dumps(cfg))
    reopened = VisualSpartaModel.from_pretrained(str(tmp_path / "old"))
    assert reopened.config.sparsity_weight == 0.0 and reopened.term_bias is None  # the paper's recipe
    assert torch.equal(reopened.word_embeddings.weight, old.word_embeddings.weight)


def test_term_bias_enters_phi_in_scores_and_index(tiny_model) -> None:
    torch.manual_seed(1)
    model = build_model(VisualSpartaConfig(**TINY, phi_term_bias=True)).eval()
    with torch.no_grad():
        model.term_bias.normal_(0, 0.3)
        pixels = torch.randn(2, 3, 32, 32)
        h, mask = model.encode_images(pixel_values=pixels)
        phi = model.term_weights(h, mask)
        ids = torch.tensor([[1037, 2417, 14291]])
        score = model.score(ids, torch.ones_like(ids, dtype=torch.bool), h, mask)  # [1, 2]
    assert torch.allclose(score[0], torch.log1p(phi[:, ids[0]]).sum(dim=1), atol=1e-5)


def test_phi_is_float32_inside_bf16_autocast(tiny_model) -> None:
    torch.manual_seed(2)
    pixels = torch.randn(3, 3, 32, 32)
    with torch.no_grad():
        h, mask = tiny_model.encode_images(pixel_values=pixels)
        reference = tiny_model.term_weights(h, mask)
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            h_bf16 = h.to(torch.bfloat16)  # what an autocast encoder hands over
            under_autocast = tiny_model.term_weights(h_bf16, mask)
            same_h = tiny_model.term_weights(h, mask)
    assert under_autocast.dtype == torch.float32 and same_h.dtype == torch.float32
    assert torch.equal(same_h, reference)  # autocast does not reach the φ computation
    # only the rounding of h to bf16 remains: within float16 rounding of φ's scale
    tol = float(torch.finfo(torch.float16).eps) * (1 + reference.abs().max().item()) * 8
    assert (under_autocast - reference).abs().max().item() <= tol


def test_keep_best_final_is_the_best_validation_epoch(toy_manifest: Path, tmp_path: Path) -> None:
    r = train(_opts(toy_manifest, tmp_path / "kb", epochs=3, val=str(toy_manifest), keep_best=True))
    sums = [sum(v.values()) for v in r.val]
    assert r.best_epoch == sums.index(max(sums)) + 1
    best = (tmp_path / "kb" / "best" / "model.safetensors").read_bytes()
    assert (r.final_dir / "model.safetensors").read_bytes() == best


def test_one_rule_for_ids_a_query_never_contains(tiny_model) -> None:
    from vsparta.model.query_tokenizer import non_query_ids
    from vsparta.model.tokenization import non_query_ids as hf_non_query_ids

    qtok = tiny_model.query_tokenizer()
    unk = qtok.token_to_id("[UNK]")
    assert unk in qtok.non_query_ids and qtok.token_to_id("[CLS]") in qtok.non_query_ids
    assert qtok.token_to_id("[unused5]") in qtok.non_query_ids
    assert set(hf_non_query_ids(tiny_model.tokenizer)) == set(qtok.non_query_ids)
    assert set(tiny_model.non_query_ids().tolist()) == set(non_query_ids(qtok._tok))
    tokens = qtok.tokenize("a red ☃ cube")
    assert unk not in tokens and tokens == [1037, 2417, 14291]  # the snowman is [UNK]: dropped
    from vsparta.service.search import query_from_text

    weights, shown = query_from_text("a red ☃ cube", qtok)
    assert list(weights) == tokens and "[UNK]" not in shown
