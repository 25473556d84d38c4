"""Both image inputs: raw pixels (patch stem, HF stem) and precomputed .npz regions with labels."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import TINY, draw_scene
from PIL import Image

from vsparta.model.configuration import VisualSpartaConfig
from vsparta.model.encode import TermEncoder
from vsparta.model.modeling import build_model
from vsparta.model.preprocess import ImagePreprocessor
from vsparta.model.regions import (
    Regions,
    collate_regions,
    load_regions,
    location_features,
    normalize_boxes,
    save_regions,
)


def test_preprocessor_is_picklable_and_normalizes() -> None:
    pre = ImagePreprocessor(image_size=16, mean=(0.5, 0.5, 0.5), std=(0.25, 0.5, 0.5))
    again = pickle.loads(pickle.dumps(pre))
    im = Image.new("RGB", (40, 20), (255, 0, 128))
    out = again(im)
    assert out.shape == (3, 16, 16) and out.dtype == np.float32
    assert np.allclose(out[0], 2.0) and np.allclose(out[1], -1.0)
    assert again.batch([im, im.convert("L")]).shape == (2, 3, 16, 16)  # grayscale becomes RGB


def test_preprocess_and_regions_do_not_import_torch() -> None:
    code = "import sys, model.preprocess, model.regions; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[2])


def test_normalize_boxes_pixels_and_normalized() -> None:
    px = np.array([[0, 0, 50, 100], [25, 50, 100, 200]], dtype=np.float32)
    assert np.allclose(normalize_boxes(px, (100, 200)), [[0, 0, 0.5, 0.5], [0.25, 0.25, 1, 1]])
    assert np.allclose(normalize_boxes(px), [[0, 0, 0.5, 0.5], [0.25, 0.25, 1, 1]])  # max coordinate
    norm = np.array([[0.1, 0.2, 0.3, 0.4]])
    assert np.allclose(normalize_boxes(norm, 640), norm)
    assert np.allclose(location_features(norm.astype(np.float32)), [[0.1, 0.3, 0.2, 0.4, 0.2, 0.2]])


@pytest.mark.parametrize(
    "features, boxes, message",
    [
        (np.zeros((3,)), np.zeros((3, 4)), "features must be"),
        (np.zeros((3, 8)), np.zeros((2, 4)), r"\[n, 4\]"),
        (np.zeros((2, 8)), np.zeros((2, 3)), r"\[n, 4\]"),
        (np.full((2, 8), np.nan), np.zeros((2, 4)), "NaN"),
        (np.zeros((1, 8)), np.array([[5, 5, 1, 1]]), "x2 >= x1"),
    ],
)
def test_load_regions_errors_name_the_file(tmp_path: Path, features, boxes, message: str) -> None:
    path = tmp_path / "bad.npz"
    np.savez(path, features=features, boxes=boxes)
    with pytest.raises(ValueError, match=message) as err:
        load_regions(path)
    assert "bad.npz" in str(err.value)


def test_load_regions_missing_arrays_and_garbage(tmp_path: Path) -> None:
    np.savez(tmp_path / "a.npz", features=np.zeros((2, 4)))
    with pytest.raises(ValueError, match="missing arrays"):
        load_regions(tmp_path / "a.npz")
    (tmp_path / "b.npz").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="b.npz"):
        load_regions(tmp_path / "b.npz")


def test_regions_round_trip_and_collation(tmp_path: Path, tiny_model) -> None:
    r = Regions(np.random.rand(3, 16), [[0, 0, 0.5, 0.5]] * 3, ["red cube", "small blue ball"])
    back = load_regions(save_regions(tmp_path / "r.npz", r))
    assert back.labels == ["red cube", "small blue ball"] and np.allclose(back.features, r.features)
    tok = tiny_model.query_tokenizer().tokenize
    batch = collate_regions([back, Regions(np.zeros((1, 16)), [[0, 0, 1, 1]])], tok, 16, 100, 3)
    assert batch.features.shape == (2, 3, 16) and batch.locations.shape == (2, 3, 6)
    assert batch.region_mask.sum(1).tolist() == [3, 1]
    assert batch.label_ids.shape == (2, 3) and batch.label_mask.sum(1).tolist() == [3, 0]  # truncated to 3
    assert batch.label_ids[0, :2].tolist() == tok("red cube")
    with pytest.raises(ValueError, match="dimension"):
        collate_regions([Regions(np.zeros((1, 5)), [[0, 0, 1, 1]])], tok, 16, 100, 3)


def test_term_encoder_pixels_and_regions_with_labels(tmp_path: Path) -> None:
    torch.manual_seed(0)
    cfg = VisualSpartaConfig(**TINY, phi_bias_init=0.5)
    build_model(cfg).save_pretrained(tmp_path / "m")
    enc = TermEncoder.from_pretrained(tmp_path / "m", device="cpu")
    assert enc.device.type == "cpu" and enc.amp is False and enc.config.image_size == 32
    pixels = enc.preprocessor.batch(
        [draw_scene("red", "square", "left"), draw_scene("blue", "circle", "right")]
    )
    docs = enc.encode_pixels(pixels, top_n=20)
    assert len(docs) == 2 and all(0 < len(d) <= 20 for d in docs)
    assert all(v > 0 for d in docs for v in d.values())
    assert len(enc.encode_pixels(pixels, top_n=None)[0]) >= len(docs[0])
    assert isinstance(enc.id_to_token(next(iter(docs[0]))), str)
    with pytest.raises(ValueError, match="expected pixels"):
        enc.encode_pixels(np.zeros((1, 3, 8, 8), dtype=np.float32))

    regs = [
        Regions(np.random.rand(4, 16), [[0, 0, 0.5, 0.5]] * 4, ["red cube"]),
        Regions(np.random.rand(4, 16), [[0, 0, 0.5, 0.5]] * 4, []),
    ]
    with_labels, without = enc.encode_regions(regs, top_n=None)
    plain = enc.encode_regions([Regions(regs[0].features, regs[0].boxes, [])], top_n=None)[0]
    assert with_labels != plain  # labels enter T_image (Eq. 6-8) and change the term weights
    assert enc.encode_regions([], top_n=10) == [] and enc.encode_pixels(pixels[:0]) == []


def test_stem_none_accepts_only_regions(tmp_path: Path) -> None:
    cfg = VisualSpartaConfig(**{**TINY, "stem": "none", "region_feature_dim": 8})
    model = build_model(cfg).eval()
    assert model.image.stem is None
    with pytest.raises(ValueError, match="stem='none'"):
        model.encode_images(pixel_values=torch.zeros(1, 3, 32, 32))
    batch = collate_regions([Regions(np.ones((2, 8)), [[0, 0, 1, 1]] * 2)], None, 8, 10, 4)
    h, mask = model.encode_images(regions=batch)
    assert h.shape == (1, 2, 32) and mask.all()


def test_hf_stem_from_a_local_vision_model(tmp_path: Path) -> None:
    """stem='hf' with a local folder (offline); the saved checkpoint reloads without it."""
    from transformers import ViTConfig, ViTModel

    torch.manual_seed(0)
    vit_cfg = ViTConfig(
        hidden_size=24,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=48,
        image_size=32,
        patch_size=8,
    )
    ViTModel(vit_cfg, add_pooling_layer=False).save_pretrained(tmp_path / "vit")
    cfg = VisualSpartaConfig(**{**TINY, "stem": "hf", "hf_vision_model": str(tmp_path / "vit")})
    model = build_model(cfg).eval()
    assert model.config.region_feature_dim == 24 and model.config.hf_vision_config["model_type"] == "vit"
    ref = ViTModel.from_pretrained(tmp_path / "vit", add_pooling_layer=False)
    assert torch.equal(model.image.stem.vision.embeddings.patch_embeddings.projection.weight,
                       ref.embeddings.patch_embeddings.projection.weight)  # fmt: skip
    h, mask = model.encode_images(pixel_values=torch.randn(2, 3, 32, 32))
    assert h.shape == (2, 16, 32)  # a 4 x 4 grid of patches, [CLS] dropped
    model.save_pretrained(tmp_path / "m")
    (tmp_path / "vit" / "model.safetensors").unlink()  # the checkpoint must not need the source any more
    enc = TermEncoder.from_pretrained(tmp_path / "m", device="cpu")
    assert len(enc.encode_pixels(np.zeros((1, 3, 32, 32), dtype=np.float32), top_n=5)) == 1


def test_training_data_handles_odd_and_broken_images(tmp_path: Path, tiny_config) -> None:
    from vsparta.core.manifest import ManifestRecord
    from vsparta.model.data import ImageStore

    good = draw_scene("red", "square", "left")
    good.convert("L").save(tmp_path / "gray.png")
    good.convert("CMYK").save(tmp_path / "cmyk.jpg")
    good.convert("RGBA").save(tmp_path / "alpha.png")
    good.save(tmp_path / "full.png")
    (tmp_path / "trunc.png").write_bytes((tmp_path / "full.png").read_bytes()[:60])
    names = ["gray.png", "cmyk.jpg", "alpha.png", "trunc.png"]
    recs = [ManifestRecord(n, tmp_path / n, ["a red square"]) for n in names]
    store = ImageStore(recs, tiny_config, lambda s: [1], cache=False)
    pixels, _ = store.image_batch([0, 1, 2])
    assert pixels.shape == (3, 3, 32, 32) and torch.isfinite(pixels).all()
    assert abs(float(pixels[1, 0].mean()) - float(pixels[2, 0].mean())) < 0.1  # CMYK ~ RGBA ~ original
    with pytest.raises(ValueError, match="trunc.png"):
        store.image_batch([3])
    with pytest.raises(ValueError, match="trunc.png"):  # from a loader thread, as from the caller's
        store.image_batch([0, 3, 1])


def test_a_batch_loaded_by_threads_is_the_one_loaded_in_turn(
    tmp_path: Path, tiny_config, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each view is drawn from its own (image, view) generator, so the loader's threads change nothing."""
    from vsparta.core.manifest import ManifestRecord
    from vsparta.model import data
    from vsparta.model.augment import Augmentation

    recs = []
    for n, (colour, shape) in enumerate([("red", "square"), ("blue", "circle"), ("green", "triangle")]):
        draw_scene(colour, shape, "left").save(tmp_path / f"{n}.png")
        recs.append(ManifestRecord(str(n), tmp_path / f"{n}.png", [f"a {colour} {shape}"]))
    augment = Augmentation(views=3, seed=5)
    indices, views = [i // 3 for i in range(9)], [0, 1, 2] * 3  # each image in its three views
    monkeypatch.setattr(data, "LOADER_THREADS", 4)
    threaded, _ = data.ImageStore(recs, tiny_config, lambda s: [1], augmentation=augment).image_batch(
        indices, views
    )
    monkeypatch.setattr(data, "LOADER_THREADS", 1)
    in_turn, _ = data.ImageStore(recs, tiny_config, lambda s: [1], augmentation=augment).image_batch(
        indices, views
    )
    assert threaded.shape == (9, 3, 32, 32) and torch.equal(threaded, in_turn)
    assert not torch.equal(threaded[0], threaded[1])  # one image's views differ: augmentation ran


@pytest.mark.parametrize(
    ("mode", "kept_by"),
    [("instance", "a shift and a scale"), ("center", "a shift"), ("none", "neither"), ("both", "neither")],
)
def test_region_norm_takes_out_each_pictures_own_look(mode: str, kept_by: str) -> None:
    """With ``region_norm`` a picture's regions are read relative to one another: a per-channel
    shift of every region (a background's colour) leaves H as it was, and with "instance" a
    per-channel scale (the light) too; padding and the batch's other pictures are never touched.
    "both" keeps the features as given beside the "instance" copy, so neither leaves H as it was."""
    rng = np.random.default_rng(0)
    feats = rng.normal(size=(3, 8)).astype(np.float32)
    boxes = [[0, 0, 0.5, 0.5], [0.5, 0, 1, 0.5], [0, 0.5, 1, 1]]
    offset = rng.normal(size=8).astype(np.float32)
    scale = rng.uniform(0.5, 2.0, size=8).astype(np.float32)
    other = Regions(rng.normal(size=(2, 8)), boxes[:2])  # fewer regions: the batch pads this picture
    cfg = VisualSpartaConfig(**{**TINY, "stem": "none", "region_feature_dim": 8, "region_norm": mode})
    model = build_model(cfg).eval()

    def encoded(f: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        return model.encode_images(regions=collate_regions([Regions(f, boxes), other], None, 8, 10, 4))

    plain = encoded(feats)
    assert plain[1].tolist() == [[True] * 3, [True, True, False]]
    kept = []
    for name, changed in (("a shift", feats + offset), ("a scale", feats * scale)):
        h, mask = encoded(changed)
        assert mask.tolist() == plain[1].tolist() and torch.allclose(h[1], plain[0][1])
        if torch.allclose(h[0], plain[0][0], atol=1e-4):
            kept.append(name)
    assert (" and ".join(kept) or "neither") == kept_by


def test_region_norm_both_reads_the_features_beside_their_instance_copy() -> None:
    """ "both" widens the projection's input to 2d + 6: the features as given, then "instance"'s copy."""
    feats = torch.randn(2, 3, 8)
    mask = torch.tensor([[True, True, True], [True, True, False]])
    encoders = {
        mode: build_model(
            VisualSpartaConfig(**{**TINY, "stem": "none", "region_feature_dim": 8, "region_norm": mode})
        ).image
        for mode in ("both", "instance")
    }
    assert encoders["both"].region_proj.in_features == 2 * 8 + 6
    assert encoders["instance"].region_proj.in_features == 8 + 6
    both = encoders["both"]._normalized(feats, mask)
    assert torch.equal(both[..., :8], feats)
    assert torch.allclose(both[..., 8:], encoders["instance"]._normalized(feats, mask))


def test_region_norm_names_its_choices() -> None:
    with pytest.raises(
        ValueError, match=r"region_norm must be one of \('none', 'center', 'instance', 'both'\)"
    ):
        VisualSpartaConfig(**{**TINY, "region_norm": "batch"})
