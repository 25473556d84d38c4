"""Reading an indexed image at several input sizes (``index_scales``, docs/index-scales.md): the
term weights are the mean of each size's, the indexer and evaluation read them the same way, the
setting is saved with the model, and a size the stem cannot read is one sentence. With
``index_scale_regions`` "native" a larger size gives a finer grid of regions instead of one pooled
back to ``grid_size``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import LITE, TINY, make_toy_dataset

from vsparta.core.manifest import read_manifest
from vsparta.model.configuration import VisualSpartaConfig
from vsparta.model.data import ImageStore, load_rgb
from vsparta.model.encode import TermEncoder
from vsparta.model.evaluate import encode_sparse, evaluate
from vsparta.model.modeling import VisualSpartaModel, build_model

SCALES = [64, 96, 128]


def _scaled_model(tmp_path: Path) -> Path:
    torch.manual_seed(0)
    build_model(VisualSpartaConfig(**LITE, index_scales=SCALES)).save_pretrained(tmp_path / "m")
    return tmp_path / "m"


def test_the_weights_are_the_mean_over_the_scales(tmp_path: Path) -> None:
    model = VisualSpartaModel.from_pretrained(str(_scaled_model(tmp_path))).eval()
    assert model.config.index_scales == SCALES  # saved and read back
    pixels = torch.randn(2, 3, 64, 64)
    with torch.inference_mode():
        each = []
        for size in SCALES:
            x = pixels if size == 64 else F.interpolate(pixels, (size, size), mode="bicubic", antialias=True)
            each.append(model.term_weights(*model.encode_images(pixel_values=x)))
        mean = model.image_term_weights(pixel_values=pixels)
        single = model.term_weights(*model.encode_images(pixel_values=pixels))
    torch.testing.assert_close(mean, torch.stack(each).mean(0))
    assert not torch.allclose(mean, single)  # the other sizes do change the weights


def test_the_indexer_and_evaluation_read_images_at_the_scales(tmp_path: Path) -> None:
    path = _scaled_model(tmp_path)
    records = read_manifest(make_toy_dataset(tmp_path / "toy"))[:4]
    model = VisualSpartaModel.from_pretrained(str(path)).eval()
    store = ImageStore(records, model.config, model.query_tokenizer().tokenize, cache=False)
    evaluated = encode_sparse(model, store, 4, torch.device("cpu"), amp=False)
    encoder = TermEncoder.from_pretrained(path, device="cpu")
    pictures = np.stack([encoder.preprocessor.pixels(load_rgb(r.image)) for r in records])
    indptr, ids, weights = encoder.encode_uint8(pictures, top_n=None)
    for k in range(len(records)):
        a, b = indptr[k], indptr[k + 1]
        indexed = dict(zip(ids[a:b].tolist(), weights[a:b].tolist(), strict=True))
        top = evaluated.ids[k][:5].tolist()
        assert [indexed[i] for i in top] == pytest.approx(evaluated.values[k][:5].tolist(), rel=1e-4)
    # regions cached at image_size cannot be read at other sizes: evaluation reads pixels and
    # builds no cache; without scales the same call builds it
    cache = tmp_path / "cache"
    evaluate(records, model, top_ns=[None], ndcg_queries=1, time_queries=0, feature_cache=cache)
    assert not cache.exists()
    model.config.index_scales = []
    evaluate(records, model, top_ns=[None], ndcg_queries=1, time_queries=0, feature_cache=cache)
    assert cache.exists()


def test_native_regions_grow_with_the_size_and_pooled_ones_do_not() -> None:
    """At image_size both read the same regions; at twice the size "pooled" averages the stem's map
    back to grid_size, "native" keeps a grid twice as fine, each box half as wide, and the model's
    weights then differ. The setting is read at each pass (the benchmark switches it in place)."""
    torch.manual_seed(0)
    model = build_model(VisualSpartaConfig(**LITE, index_scales=[64, 128])).eval()
    stem, grid = model.image.stem, LITE["grid_size"]
    pixels = torch.randn(2, 3, 64, 64)
    larger = F.interpolate(pixels, (128, 128), mode="bicubic", antialias=True)
    with torch.inference_mode():
        weights, at_size, (pooled, pooled_boxes) = {}, {}, stem(larger)
        for mode in ("pooled", "native"):
            model.config.index_scale_regions = mode
            at_size[mode] = stem(pixels)[0]
            weights[mode] = model.image_term_weights(pixel_values=pixels)
        native, native_boxes = stem(larger)
    assert torch.equal(at_size["pooled"], at_size["native"]) and at_size["native"].shape[1] == grid**2
    assert pooled.shape[1] == grid**2 and native.shape[1] == (2 * grid) ** 2
    widths = {
        "pooled": pooled_boxes[:, 2] - pooled_boxes[:, 0],
        "native": native_boxes[:, 2] - native_boxes[:, 0],
    }
    torch.testing.assert_close(widths["pooled"], torch.full((grid**2,), 1 / grid))
    torch.testing.assert_close(widths["native"], torch.full(((2 * grid) ** 2,), 1 / (2 * grid)))
    assert not torch.allclose(weights["pooled"], weights["native"])


@pytest.mark.parametrize(
    ("config", "sentence"),
    [
        (
            {**LITE, "index_scales": [64, 100]},
            "reads input sizes that are multiples of 32: index_scales [64, 100]",
        ),
        ({**TINY, "index_scales": [32, 64]}, "reads images at image_size (32) only"),
        (
            {**LITE, "grid_size": 1, "index_scales": [64, 96], "index_scale_regions": "native"},
            "index_scale_regions 'native' reads 96 px as a grid of grid_size x 96 / image_size = 1 x 96 / 64",
        ),
        ({**LITE, "index_scale_regions": "finer"}, "index_scale_regions must be one of ('pooled', 'native')"),
    ],
)
def test_a_size_the_stem_cannot_read_is_one_sentence(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, config: dict, sentence: str
) -> None:
    from vsparta.cli import main

    manifest = make_toy_dataset(tmp_path / "toy")
    argv = ["train", "--manifest", str(manifest), "--out", str(tmp_path / "run"), "--no-progress"]
    assert main([*argv, "--config", json.dumps(config)]) == 2
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1 and sentence in errors[0] and "\n" not in errors[0], errors
    assert not (tmp_path / "run").exists()


def test_train_saves_the_scales_it_is_given(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from vsparta.cli import main

    manifest = make_toy_dataset(tmp_path / "toy")
    argv = ["train", "--manifest", str(manifest), "--out", str(tmp_path / "run"), "--no-progress"]
    with pytest.raises(SystemExit) as bad:
        main([*argv, "--config", json.dumps(LITE), "--index-scales", "64,0"])
    assert bad.value.code == 2 and "input sizes must be positive" in capsys.readouterr().err
    scales = ["--index-scales", "64,96", "--index-scale-regions", "native"]
    assert main([*argv, "--config", json.dumps(LITE), "--epochs", "1", *scales]) == 0
    saved = json.loads((tmp_path / "run" / "final" / "config.json").read_text())
    assert saved["index_scales"] == [64, 96] and saved["index_scale_regions"] == "native"
