"""Manifest and precomputed-region inputs with the real tiny model: ids, metadata, bad .npz."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from vsparta.core.manifest import ManifestRecord, write_manifest
from vsparta.indexer.items import path_id
from vsparta.indexer.runner import IndexConfig, run_index
from vsparta.termindex import open_index


@pytest.fixture
def region_manifest(tmp_path: Path, tiny_model: Path) -> Path:
    """6 records: 3 with good regions, 1 without (pixels), 1 missing .npz, 1 wrong feature size."""
    dim = json.loads((tiny_model / "config.json").read_text())["region_feature_dim"]
    root = tmp_path / "data"
    (root / "img").mkdir(parents=True)
    (root / "regions").mkdir()
    rng = np.random.default_rng(3)
    records = []
    for i in range(6):
        image = root / "img" / f"{i}.png"
        Image.new("RGB", (40, 30), tuple(int(c) for c in rng.integers(0, 256, 3))).save(image)
        regions = root / "regions" / f"{i}.npz"
        if i in (0, 1, 2, 5):
            d = dim if i != 5 else dim + 3
            boxes = np.array([[0, 0, 20, 15], [10, 5, 40, 30]], dtype=np.float32)  # pixels
            np.savez(regions, features=rng.normal(size=(2, d)).astype(np.float32), boxes=boxes,
                     labels=np.array(["red cube", "small ball"]))  # fmt: skip
        records.append(
            ManifestRecord(
                id=f"scene-{i}",
                image=image,
                captions=[f"caption {i}"],
                metadata={"split": "test", "n": i},
                regions=None if i == 3 else regions,
            )  # fmt: skip
        )
    return write_manifest(root / "manifest.jsonl", records)


def _config(manifest: Path, model: Path, backend: str, **kw) -> IndexConfig:
    kw.setdefault("workers", 1)
    return IndexConfig(
        input=manifest, backend=backend, model=model, device="cpu", top_n=40, progress=False, **kw
    )


def test_manifest_with_regions(region_manifest: Path, tiny_model: Path, tmp_path: Path) -> None:
    failures = tmp_path / "failures.jsonl"
    spec = f"embedded:{tmp_path / 'index'}"
    summary = run_index(_config(region_manifest, tiny_model, spec, failures=failures))
    assert summary.indexed == 4 and summary.failed == 2
    report = {r["id"]: r for r in map(json.loads, failures.read_text().splitlines())}
    assert set(report) == {"scene-4", "scene-5"}
    assert {r["reason"] for r in report.values()} == {"bad_regions"}
    assert "dimensions" in report["scene-5"]["message"]
    with open_index(spec) as index:
        assert index.count() == 4
        doc = index.get("scene-0")
        assert 0 < len(doc.weights) <= 40
        meta = dict(doc.metadata)
        assert meta["image"] == "img/0.png" and meta["captions"] == ["caption 0"]
        assert meta["split"] == "test" and meta["n"] == 0
        assert Path(meta["image_root"]) == region_manifest.parent.resolve()
        pixels_doc = index.get("scene-3")  # no regions: encoded from pixels
        assert pixels_doc.weights != doc.weights

    # --ignore-regions: every record from its pixels
    spec2 = f"embedded:{tmp_path / 'pixels'}"
    summary2 = run_index(_config(region_manifest, tiny_model, spec2, ignore_regions=True))
    assert summary2.indexed == 6 and summary2.failed == 0
    with open_index(spec2) as index, open_index(spec) as with_regions:
        assert dict(index.get("scene-3").weights) == dict(with_regions.get("scene-3").weights)
        assert dict(index.get("scene-0").weights) != dict(with_regions.get("scene-0").weights)


def test_folder_of_region_files(region_manifest: Path, tiny_model: Path, tmp_path: Path) -> None:
    folder = region_manifest.parent / "regions"
    spec = f"embedded:{tmp_path / 'index'}"
    summary = run_index(_config(folder, tiny_model, spec, workers=0))
    assert summary.total == 4 and summary.indexed == 3 and summary.failures_by_reason == {"bad_regions": 1}
    with open_index(spec) as index:
        doc = index.get(path_id("0.npz"))
        assert doc.metadata["regions"] == "0.npz"
