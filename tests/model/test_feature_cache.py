"""Frozen means cached: a frozen stem's regions are computed once per image and view, read back by
training and evaluation exactly as the stem gives them, rebuilt when anything they depend on
changes, and a folder holding something else is refused in one sentence."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import LITE, make_toy_dataset

from vsparta.core.manifest import read_manifest
from vsparta.model.augment import Augmentation
from vsparta.model.configuration import VisualSpartaConfig
from vsparta.model.data import ImageStore
from vsparta.model.evaluate import encode_sparse
from vsparta.model.feature_cache import META, FeatureCache, ForeignCache, attach
from vsparta.model.modeling import build_model
from vsparta.model.train import TrainOptions, train


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_toy_dataset(tmp_path_factory.mktemp("toy"))


def _model(**config):
    torch.manual_seed(0)
    return build_model(VisualSpartaConfig(**{**LITE, **config})).eval()


def _store(model, manifest: Path, views: int = 1) -> ImageStore:
    records = read_manifest(manifest)
    return ImageStore(
        records, model.config, model.query_tokenizer().tokenize, augmentation=Augmentation(views)
    )


def test_cached_regions_are_the_stems_own(toy: Path, tmp_path: Path) -> None:
    model = _model()
    store = _store(model, toy, views=3)
    assert attach(store, model, tmp_path / "cache")
    assert not store._pixels  # the build read each picture once and kept none in memory
    cache = store.features
    assert cache is not None and cache.features.shape == (16, 3, 4, 1280) and cache.views == 3
    with torch.inference_mode():
        for view in range(3):
            pixels = torch.from_numpy(np.stack([store.pixels(i, view) for i in (0, 5)]))
            expected, boxes = model.image.stem(pixels)
            assert torch.allclose(cache.regions([0, 5], [view, view]), expected, atol=2e-2, rtol=1e-2)
    assert torch.equal(cache.boxes, boxes)
    assert not torch.allclose(cache.regions([0], [0]), cache.regions([0], [1]))  # views differ
    # search through the cache: the terms the indexer computes from pixels, to float16 rounding
    plain = _store(model, toy)
    images = encode_sparse(model, store, 8, torch.device("cpu"), amp=False)
    direct = encode_sparse(model, plain, 8, torch.device("cpu"), amp=False)
    for a_ids, a_w, b_ids, b_w in zip(images.ids, images.values, direct.ids, direct.values, strict=True):
        assert list(a_ids[:5]) == list(b_ids[:5]) and np.allclose(a_w[:20], b_w[:20], atol=2e-2, rtol=2e-2)


def test_a_build_in_many_batches_puts_every_image_and_view_in_its_place(toy: Path, tmp_path: Path) -> None:
    """The build decodes the next batch while the stem runs on this one: batches of 5 over 16 images
    x 2 views (7 batches, the last one short) land where one batch puts them."""
    model = _model()
    stem = model.image.stem
    whole = FeatureCache.open_or_build(tmp_path / "one", _store(model, toy, views=2), stem, batch_size=64)
    parts = FeatureCache.open_or_build(tmp_path / "many", _store(model, toy, views=2), stem, batch_size=5)
    every = list(range(16))
    for view in (0, 1):  # to float16 rounding (the stem's arithmetic may differ by batch size)
        a, b = parts.regions(every, [view] * 16), whole.regions(every, [view] * 16)
        assert torch.allclose(a, b, atol=1e-2, rtol=1e-2)
    assert torch.equal(parts.boxes, whole.boxes)


def test_a_matching_cache_is_reused_a_stale_one_rebuilt(toy: Path, tmp_path: Path, caplog) -> None:
    model = _model()
    attach(_store(model, toy), model, tmp_path / "c")
    stamp = (tmp_path / "c" / META).stat().st_mtime_ns
    attach(_store(model, toy), model, tmp_path / "c")
    assert (tmp_path / "c" / META).stat().st_mtime_ns == stamp  # the same key: read, not built
    changes = [
        (_model(image_size=96, grid_size=3), toy, 1, "image_size, grid_size"),  # another resolution
        (_model(), toy, 2, "views"),  # other views
    ]
    torch.manual_seed(1)
    other = build_model(VisualSpartaConfig(**LITE)).eval()  # other weights, same stem
    changes.append((other, toy, 1, "weights"))
    for m, manifest, views, what in changes:
        attach(_store(model, toy), model, tmp_path / "c")  # back to the first key
        caplog.clear()
        store = _store(m, manifest, views)
        attach(store, m, tmp_path / "c")
        assert f"is stale ({what} changed): rebuilding it" in caplog.text
        assert json.loads((tmp_path / "c" / META).read_text())["key"]["views"]["views"] == views
    record = read_manifest(toy)[3]
    stat = Path(record.image).stat()
    os.utime(record.image, ns=(1, 1))  # an image file changed since the cache was built
    try:
        caplog.clear()
        attach(_store(other, toy), other, tmp_path / "c")
        assert "is stale (images changed)" in caplog.text
    finally:
        os.utime(record.image, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def test_a_cache_of_more_views_serves_runs_that_want_fewer(toy: Path, tmp_path: Path, caplog) -> None:
    model = _model()
    attach(_store(model, toy, views=3), model, tmp_path / "c")
    stamp = (tmp_path / "c" / META).stat().st_mtime_ns
    for views in (1, 2, 3):
        store = _store(model, toy, views)
        attach(store, model, tmp_path / "c")
        assert store.pick_views(np.random.default_rng(0)).max() < views
    assert (tmp_path / "c" / META).stat().st_mtime_ns == stamp and "stale" not in caplog.text
    attach(_store(model, toy, views=4), model, tmp_path / "c")
    assert "is stale (views changed)" in caplog.text


def test_a_folder_with_another_stems_cache_or_other_files_is_refused(toy: Path, tmp_path: Path) -> None:
    patch = build_model(VisualSpartaConfig(image_size=32, grid_size=4, stem_channels=[8], freeze_stem=True))
    patch_store = ImageStore(read_manifest(toy), patch.config, patch.query_tokenizer().tokenize)
    assert attach(patch_store, patch, tmp_path / "patch")  # a frozen patch stem caches too
    model = _model()
    with pytest.raises(ForeignCache, match="holds region features of stem 'patch', not 'efficientnet_lite0'"):
        FeatureCache.open_or_build(tmp_path / "patch", _store(model, toy), model.image.stem)
    (tmp_path / "photos").mkdir()
    (tmp_path / "photos" / "holiday.jpg").write_bytes(b"x")
    with pytest.raises(ForeignCache, match="is not empty and holds no feature cache"):
        attach(_store(model, toy), model, tmp_path / "photos")
    assert (tmp_path / "photos" / "holiday.jpg").read_bytes() == b"x"


def test_training_a_frozen_stem_builds_the_cache_once_and_leaves_the_stem(toy: Path, tmp_path: Path) -> None:
    def run(out: str, epochs: int) -> Path:
        opts = TrainOptions(
            manifest=str(toy), val=str(toy), out=str(tmp_path / out), config=json.dumps(LITE), epochs=epochs,
            batch_size=8, lr=1e-3, augment_views=2, feature_cache=str(tmp_path / "fc"), progress=False,
        )  # fmt: skip
        return train(opts).final_dir

    first = run("a", 1)
    built = (tmp_path / "fc" / "train" / META).stat().st_mtime_ns
    second = run("b", 2)
    assert (tmp_path / "fc" / "train" / META).stat().st_mtime_ns == built  # the second run read it
    key = json.loads((tmp_path / "fc" / "train" / META).read_text())["key"]
    assert key["views"]["views"] == 2 and key["stem"] == "efficientnet_lite0" and key["count"] == 16
    from vsparta.model.modeling import VisualSpartaModel

    a, b = (VisualSpartaModel.from_pretrained(str(p)) for p in (first, second))
    assert all(
        torch.equal(x, y)
        for x, y in zip(a.image.stem.state_dict().values(), b.image.stem.state_dict().values(), strict=True)
    )  # frozen: both runs kept the stem as built
    assert not torch.equal(a.image.region_proj.weight, b.image.region_proj.weight)  # the rest trained
