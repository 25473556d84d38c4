"""Frozen means cached: a frozen stem's regions of every image and view, computed once, memory-mapped.

Why: with the vision stem frozen (a pretrained CNN, ``VisionStem.frozen``), recomputing its
features every epoch is most of the cost of an epoch on CPU; from the cache an epoch costs only the
transformer (``python -m bench.feature_cache`` measures it).

A cache is one folder: ``features.npy`` (``[images, views, regions, dim]`` float16, read through
``np.load(mmap_mode="r")``), ``boxes.npy`` (``[regions, 4]``) and ``meta.json``, whose ``key`` says
what the features depend on: the stem's name and a hash of its weights, the input size and
normalisation, the grid, the augmentation views (``model.augment``) and the images (ids, paths,
sizes and modification times, in order). ``meta.json`` is written last, so a build that was
killed leaves no cache. Opening a cache whose key differs rebuilds it and says why (never reused
silently); a folder holding another stem's cache is refused in one sentence
(``ForeignCache``), since rebuilding would throw away a cache some other model uses.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import torch

from vsparta.core.progress import progress_bar
from vsparta.model.recipe import frozen_stem

log = logging.getLogger(__name__)

META = "meta.json"
FEATURES = "features.npy"
BOXES = "boxes.npy"


class ForeignCache(ValueError):
    """The folder holds something this cache must not overwrite: another stem's region features,
    or files that are no feature cache. The message names what is there."""


def images_key(records: Sequence[Any]) -> str:
    """A hash of the images in order: ids, paths, sizes and modification times (an edited file, or
    another manifest, is another cache)."""
    digest = hashlib.sha256()
    for r in records:
        path = Path(r.image)
        stat = path.stat()
        digest.update(f"{r.id}\0{path.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def cache_key(store: Any, stem: Any) -> dict[str, Any]:
    """Everything the cached features depend on (``store``: a ``model.data.ImageStore``)."""
    config = store.config
    key = {
        "stem": config.stem,
        "weights": stem.fingerprint(),
        "image_size": int(config.image_size),
        "grid_size": int(config.grid_size),
        "image_mean": [float(x) for x in config.image_mean],
        "image_std": [float(x) for x in config.image_std],
        "views": store.augmentation.key(),
        "images": images_key(store.records),
        "count": len(store.records),
    }
    return json.loads(json.dumps(key))  # as meta.json gives it back (tuples as lists)


def _differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    return [
        k
        for k in new
        if old.get(k) != new[k] and not (k == "views" and k in old and _views_served(old[k], new[k]))
    ]


def _views_served(cached: dict[str, Any], wanted: dict[str, Any]) -> bool:
    """A cache of N views serves a run that wants fewer of the same views: view v is a function of
    (seed, image, v) and the ranges, not of N (``model.augment``); view 0 is always the image."""
    if wanted["views"] == 1:
        return True
    same_ranges = {k: v for k, v in cached.items() if k != "views"} == {
        k: v for k, v in wanted.items() if k != "views"
    }
    return same_ranges and cached["views"] >= wanted["views"]


class FeatureCache:
    """An open cache: ``regions(indices, views)`` -> features ``[B, n, d]`` float32 and boxes."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.meta = json.loads((folder / META).read_text(encoding="utf-8"))
        self.features = np.load(folder / FEATURES, mmap_mode="r")  # [N, V, n, d] float16
        self.boxes = torch.from_numpy(np.load(folder / BOXES))  # [n, 4]

    @property
    def views(self) -> int:
        return int(self.features.shape[1])

    def regions(self, indices: Sequence[int], views: Sequence[int] | None = None) -> torch.Tensor:
        """Features of images ``indices`` in views ``views`` (default: view 0, the plain image)."""
        rows = np.asarray(indices, dtype=np.int64)
        cols = np.zeros_like(rows) if views is None else np.asarray(views, dtype=np.int64)
        return torch.from_numpy(np.ascontiguousarray(self.features[rows, cols], dtype=np.float32))

    @classmethod
    def open_or_build(
        cls,
        folder: str | Path,
        store: Any,
        stem: Any,
        batch_size: int = 64,
        device: torch.device | None = None,
        progress: bool = True,
    ) -> FeatureCache:
        """The cache in ``folder`` if its key matches ``store``'s images and ``stem``; else built."""
        folder = Path(folder)
        key = cache_key(store, stem)
        meta_path = folder / META
        if meta_path.is_file():
            old = json.loads(meta_path.read_text(encoding="utf-8")).get("key", {})
            if old.get("stem") != key["stem"]:
                raise ForeignCache(
                    f"{folder} holds region features of stem {old.get('stem')!r}, not {key['stem']!r}: "
                    "give another --feature-cache folder or delete that one"
                )
            if not _differences(old, key):
                return cls(folder)
            log.warning(
                "feature cache %s is stale (%s changed): rebuilding it",
                folder,
                ", ".join(_differences(old, key)),
            )
            meta_path.unlink()
        elif folder.exists() and any(folder.iterdir()):
            if not (folder / FEATURES).exists() and not (folder / (FEATURES + ".partial")).exists():
                raise ForeignCache(f"{folder} is not empty and holds no feature cache: give another folder")
        build(folder, store, stem, key, batch_size, device or torch.device("cpu"), progress)
        return cls(folder)


def attach(
    store: Any,
    model: Any,
    folder: str | Path | None,
    device: torch.device | None = None,
    progress: bool = True,
) -> bool:
    """Make ``store`` read the regions of ``model``'s frozen stem from the cache in ``folder``
    (built or rebuilt as needed). False, and pixels as before, when the stem trains or there is
    none, or no folder is given."""
    stem = frozen_stem(model)
    if stem is None or folder is None:
        return False
    store.features = FeatureCache.open_or_build(folder, store, stem, device=device, progress=progress)
    return True


@torch.inference_mode()
def build(
    folder: Path,
    store: Any,
    stem: Any,
    key: dict[str, Any],
    batch_size: int,
    device: torch.device,
    progress: bool,
) -> None:
    """Run the stem over every image and view into ``features.npy``; ``meta.json`` last."""
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / (FEATURES + ".partial")
    was_training = stem.training
    stem.eval()
    t0 = time.perf_counter()
    n_views = store.augmentation.views
    jobs = [(i, v) for i in range(len(store)) for v in range(n_views)]
    out = None
    boxes = None
    chunks = [jobs[start : start + batch_size] for start in range(0, len(jobs), batch_size)]
    bar = progress_bar(chunks, desc="feature cache", unit="batch", enabled=progress, leave=False)
    # the next chunk's pictures are decoded while the stem runs on this one (on a GPU the build
    # otherwise waits for one thread's decoding: 134 views/s on a 16-core H200 machine)
    with ThreadPoolExecutor(1, thread_name_prefix="vsparta-cache-prefetch") as prefetch:
        pending = prefetch.submit(store.pixel_batch, chunks[0], False) if chunks else None
        for n, chunk in enumerate(bar):
            assert pending is not None
            pixels = torch.from_numpy(pending.result()).to(device)
            if n + 1 < len(chunks):
                pending = prefetch.submit(store.pixel_batch, chunks[n + 1], False)
            feats, boxes = stem(pixels)  # [b, n, d], [n, 4]
            if out is None:
                shape = (len(store), n_views, *feats.shape[1:])
                out = np.lib.format.open_memmap(partial, mode="w+", dtype=np.float16, shape=shape)
            rows = np.asarray([i for i, _ in chunk])
            cols = np.asarray([v for _, v in chunk])
            out[rows, cols] = feats.to("cpu", torch.float16).numpy()
    stem.train(was_training)
    if out is None or boxes is None:
        raise ValueError("a feature cache needs at least one image")
    out.flush()
    del out
    os.replace(partial, folder / FEATURES)
    np.save(folder / BOXES, boxes.cpu().numpy().astype(np.float32))
    seconds = time.perf_counter() - t0
    meta = {
        "key": key,
        "seconds": round(seconds, 1),
        "images_per_s": round(len(jobs) / max(seconds, 1e-9), 1),
    }
    tmp = folder / (META + ".tmp")
    tmp.write_text(json.dumps(meta, indent=1), encoding="utf-8")
    os.replace(tmp, folder / META)
    log.info("feature cache %s: %d images x %d views in %.0f s", folder, len(store), n_views, seconds)
