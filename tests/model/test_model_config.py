"""Config validation, presets, and save/load round trips (weights, config, tokenizer)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from conftest import TINY

from vsparta.model.config_parts import DEFAULT_TOP_N
from vsparta.model.configuration import VisualSpartaConfig, config_from_spec
from vsparta.model.dense import DenseConfig, DenseDualEncoder, load_model
from vsparta.model.modeling import VisualSpartaModel, build_model
from vsparta.model.query_tokenizer import QueryTokenizer


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (
            {"stem": "vit"},
            "unknown vision stem .vit.: one of patch, hf, efficientnet_lite0, efficientnet_lite2, none",
        ),
        ({"hidden_act": "swish"}, "hidden_act"),
        ({"hidden_size": 30, "num_attention_heads": 4}, "multiple of"),
        ({"top_n": 0}, "top_n"),
        ({"image_size": 30, "grid_size": 4}, "multiple of grid_size"),
        ({"stem": "hf"}, "hf_vision_model"),
        ({"label_segment_id": 2}, "label_segment_id"),
    ],
)
def test_bad_options_raise_clear_errors(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        VisualSpartaConfig(**kwargs)


def test_presets_and_json_specs(tmp_path: Path) -> None:
    assert config_from_spec("tiny").hidden_size == 64
    assert config_from_spec("base").hidden_size == 384
    assert config_from_spec('{"hidden_size": 32, "num_attention_heads": 2}').hidden_size == 32
    (tmp_path / "c.json").write_text(json.dumps(TINY))
    assert config_from_spec(str(tmp_path / "c.json")).grid_size == 4
    with pytest.raises(ValueError, match="--config"):
        config_from_spec("huge")
    cfg = VisualSpartaConfig(**TINY)
    assert cfg.top_n == DEFAULT_TOP_N and cfg.model_type == "visualsparta"


@pytest.mark.parametrize(
    ("preset", "measured"),
    [("lite0-320-words", "lite0-320-words"), ("lite0-320-words-wide", "lite0-320-words-h128")],
)
def test_a_recommended_preset_is_its_measured_config(preset: str, measured: str) -> None:
    """The README's figures for a preset come from a run with a config file: they must stay one."""
    from vsparta.model.configuration import PRESETS

    folder = Path(__file__).parents[2] / "docs" / "quality-objects-1161" / measured
    assert PRESETS[preset] == json.loads((folder / "config.json").read_text())


def test_save_load_round_trip_gives_identical_outputs(tmp_path: Path, tiny_config) -> None:
    torch.manual_seed(0)
    model = build_model(tiny_config).eval()
    with torch.no_grad():
        model.phi_bias.fill_(0.25)
    model.save_pretrained(tmp_path / "m")
    assert (tmp_path / "m" / "tokenizer.json").exists()
    again = VisualSpartaModel.from_pretrained(tmp_path / "m").eval()
    a, b = again.config.to_dict(), model.config.to_dict()
    a.pop("_name_or_path", None), b.pop("_name_or_path", None)
    assert a == b
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        h1, m1 = model.encode_images(pixel_values=x)
        h2, m2 = again.encode_images(pixel_values=x)
        assert torch.equal(h1, h2) and torch.equal(m1, m2)
        assert torch.equal(model.term_weights(h1, m1), again.term_weights(h2, m2))
    # the service's torch-free tokenizer opens the checkpoint folder as it is
    qt = QueryTokenizer.from_pretrained(tmp_path / "m")
    assert qt.tokenize("a red cube") == model.query_tokenizer().tokenize("a red cube") != []
    assert load_model(tmp_path / "m").__class__ is VisualSpartaModel


def test_dense_round_trip(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = build_model(DenseConfig(**TINY), model_class=DenseDualEncoder).eval()
    model.save_pretrained(tmp_path / "d")
    again = load_model(tmp_path / "d").eval()
    assert isinstance(again, DenseDualEncoder)
    ids = torch.tensor([[2417, 14291, 0]])
    mask = torch.tensor([[True, True, False]])
    x = torch.randn(3, 3, 32, 32)
    with torch.no_grad():
        assert torch.equal(model(ids, mask, pixel_values=x), again(ids, mask, pixel_values=x))
        assert model(ids, mask, pixel_values=x).shape == (1, 3)


def test_load_model_rejects_other_folders(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_model(tmp_path)
    (tmp_path / "config.json").write_text('{"model_type": "bert"}')
    with pytest.raises(ValueError, match="unknown model_type"):
        load_model(tmp_path)


def test_dense_similarity_options() -> None:
    with pytest.raises(ValueError, match="similarity"):
        DenseConfig(**TINY, similarity="l2")
    torch.manual_seed(0)
    ids, mask = torch.tensor([[2417, 14291]]), torch.tensor([[True, True]])
    x = torch.randn(2, 3, 32, 32)
    cos = DenseDualEncoder(DenseConfig(**TINY, similarity="cosine")).eval()
    with torch.no_grad():
        scores = cos(ids, mask, pixel_values=x)
        assert scores.abs().max() <= cos.logit_scale.exp() + 1e-4  # bounded by the temperature
        dot = DenseDualEncoder(DenseConfig(**TINY)).eval()
        assert dot.config.similarity == "dot"
        q, v = dot.encode_text(ids, mask), dot.encode_image_vectors(pixel_values=x)
        assert torch.allclose(dot(ids, mask, pixel_values=x), q @ v.T)


def test_dense_mean_pooling_averages_the_real_tokens_and_survives_a_save(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="pooling"):
        DenseConfig(**TINY, pooling="max")
    torch.manual_seed(0)
    model = DenseDualEncoder(DenseConfig(**TINY, pooling="mean")).eval()
    x = torch.randn(2, 3, 32, 32)
    ids, mask = torch.tensor([[2417, 14291, 0]]), torch.tensor([[True, True, False]])
    with torch.no_grad():
        h, image_mask = model.image(pixel_values=x)
        assert torch.allclose(model.encode_image_vectors(pixel_values=x), h.mean(dim=1), atol=1e-6)
        # the padded query position changes nothing: only [CLS] and the two real tokens are averaged
        assert torch.allclose(
            model.encode_text(ids, mask), model.encode_text(ids[:, :2], mask[:, :2]), atol=1e-6
        )
        cls_model = DenseDualEncoder(DenseConfig(**TINY)).eval()
        cls_model.load_state_dict(model.state_dict())
        assert not torch.allclose(cls_model.encode_image_vectors(pixel_values=x), h.mean(dim=1))
    assert bool(image_mask.all())
    model.save_pretrained(tmp_path / "m")
    assert load_model(tmp_path / "m").config.pooling == "mean"
