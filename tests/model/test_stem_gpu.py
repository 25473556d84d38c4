"""The pretrained vision stem on CUDA (``scripts/gpu-check.sh`` runs these): the indexer's encoder
gives the CPU's terms, and a frozen stem's feature cache built on the GPU holds the CPU's regions
and trains a model there. The ``cpu`` halves hold the same harness to the CPU itself (exactly).

Bounds (stated before any GPU run): float32 with TF32 off, every image's top-10 terms the same set
and weights within 1e-3 relative; regions within 1e-3 (float16 cache rounding is the same on both).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import LITE, draw_scene, make_toy_dataset

from vsparta.core.manifest import read_manifest
from vsparta.model.configuration import VisualSpartaConfig
from vsparta.model.data import ImageStore
from vsparta.model.encode import TermEncoder
from vsparta.model.feature_cache import attach
from vsparta.model.modeling import build_model
from vsparta.model.train import TrainOptions, train

REAL = {**LITE, "stem_weights": None, "image_size": 224, "grid_size": 7}  # the ImageNet weights
DEVICES = [pytest.param("cuda", marks=pytest.mark.gpu), "cpu"]


def _pictures(size: int) -> np.ndarray:
    scenes = [
        draw_scene(c, s, side, size)
        for c in ("red", "blue")
        for s in ("square", "circle")
        for side in ("left",)
    ]
    return np.stack([np.asarray(im) for im in scenes])  # uint8 [4, S, S, 3]


@pytest.mark.parametrize("stride", [32, 16])  # the head's map; the finer stride-16 one
@pytest.mark.parametrize("device", DEVICES)
def test_the_indexer_encodes_with_the_pretrained_stem_as_on_the_cpu(
    tmp_path: Path, device: str, stride: int, record_property, float32_on_cuda
) -> None:
    torch.manual_seed(0)
    config = {**REAL, "stem_stride": stride, "grid_size": 224 // stride}
    build_model(VisualSpartaConfig(**config)).save_pretrained(tmp_path / "m")
    pixels = _pictures(224)
    ref = TermEncoder.from_pretrained(tmp_path / "m", device="cpu").encode_uint8(pixels, top_n=10)
    got = TermEncoder.from_pretrained(tmp_path / "m", device=device, amp=False).encode_uint8(pixels, top_n=10)
    worst = 0.0
    for i in range(len(pixels)):
        a = slice(ref[0][i], ref[0][i + 1])
        b = slice(got[0][i], got[0][i + 1])
        assert set(ref[1][a].tolist()) == set(got[1][b].tolist())
        order_a, order_b = np.argsort(ref[1][a]), np.argsort(got[1][b])
        diff = np.abs(ref[2][a][order_a] - got[2][b][order_b]) / np.abs(ref[2][a][order_a])
        worst = max(worst, float(diff.max()))
    record_property(f"lite0_stride{stride}_terms_vs_cpu", {"worst_relative_difference": worst})
    assert worst <= (1e-3 if device == "cuda" else 0.0)


@pytest.mark.parametrize("device", DEVICES)
def test_a_frozen_stems_cache_built_on_the_device_trains_there(
    tmp_path: Path, device: str, record_property, float32_on_cuda
) -> None:
    manifest = make_toy_dataset(tmp_path / "toy")
    config = {**REAL, "image_size": 64, "grid_size": 2}
    torch.manual_seed(0)
    model = build_model(VisualSpartaConfig(**config))
    caches = {}
    for name in ("cpu", device):
        store = ImageStore(read_manifest(manifest), model.config, model.query_tokenizer().tokenize)
        attach(store, model.to(name), tmp_path / f"cache-{name}", device=torch.device(name), progress=False)
        caches[name] = store.features.regions(range(16))
    gap = float((caches["cpu"] - caches[device]).abs().max())
    record_property("lite0_cache_vs_cpu", gap)
    assert gap <= 1e-3 * float(caches["cpu"].abs().max())
    opts = TrainOptions(
        manifest=str(manifest), out=str(tmp_path / "run"), config=json.dumps(config), epochs=1, batch_size=8,
        lr=1e-3, augment_views=2, device=device, progress=False,
    )  # fmt: skip
    result = train(opts)
    assert len(result.losses) == 2 and all(np.isfinite(result.losses))
