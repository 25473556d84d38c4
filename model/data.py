"""Training/evaluation data: manifest records -> model inputs (pixels or precomputed regions).

A batch is a set of distinct images and all (up to ``captions_per_image``) of their captions:
each caption is a query whose positive is its own image and whose negatives are the other images
of the batch (paper Eq. 13). Distinct images per batch mean no false in-batch negatives.

An image may come in several fixed views (``model.augment``); with a frozen stem its regions come
from a feature cache (``model.feature_cache``) instead of pixels, through the same region path as
precomputed detector regions (Eq. 4-5).
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from PIL import Image

from vsparta.core.images import load_image
from vsparta.core.manifest import ManifestRecord
from vsparta.model.augment import Augmentation
from vsparta.model.preprocess import ImagePreprocessor
from vsparta.model.regions import RegionBatch, Regions, collate_regions, load_regions
from vsparta.model.stems.base import box_locations
from vsparta.model.stems.registry import stem_class

if TYPE_CHECKING:
    from vsparta.model.feature_cache import FeatureCache

log = logging.getLogger(__name__)

# Threads that decode and augment a batch's pictures: a GPU step on a fine-tuned stem waits for them.
LOADER_THREADS = min(8, os.cpu_count() or 1)


@functools.cache
def _loader() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(LOADER_THREADS, thread_name_prefix="vsparta-pixels")


def load_rgb(path: str | Path) -> Image.Image:
    """One RGB image, EXIF-rotated; odd modes converted, broken files raise ``ImageError`` (a ValueError)
    naming the file and the reason (``vsparta.core.images``)."""
    return load_image(path)


@dataclass
class Batch:
    """Inputs for one training/eval step."""

    query_ids: torch.Tensor  # [Q, m] long
    query_mask: torch.Tensor  # [Q, m] bool
    targets: torch.Tensor  # [Q] long: index of each query's image in the batch
    pixel_values: torch.Tensor | None  # [B, 3, S, S]
    regions: RegionBatch | None

    def to(self, device: torch.device) -> Batch:
        return Batch(
            self.query_ids.to(device),
            self.query_mask.to(device),
            self.targets.to(device),
            None if self.pixel_values is None else self.pixel_values.to(device),
            None if self.regions is None else self.regions.to(device),
        )

    def image_inputs(self) -> dict[str, Any]:
        return {"pixel_values": self.pixel_values, "regions": self.regions}


def pad_queries(token_lists: Sequence[Sequence[int]], pad_id: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Ragged token ids -> ``[Q, m]`` ids and mask (m >= 1 so an empty query stays a valid row)."""
    m = max(1, max((len(t) for t in token_lists), default=1))
    ids = torch.full((len(token_lists), m), pad_id, dtype=torch.long)
    mask = torch.zeros(len(token_lists), m, dtype=torch.bool)
    for i, toks in enumerate(token_lists):
        if toks:
            ids[i, : len(toks)] = torch.tensor(list(toks), dtype=torch.long)
            mask[i, : len(toks)] = True
    return ids, mask


class ImageStore:
    """Loads each record's image input once; keeps it in memory when the set is small enough.

    ``augmentation``: the fixed views of each image (view 0 is the image itself); ``features``: a
    frozen stem's cached regions of every image and view, read instead of pixels.
    """

    def __init__(
        self,
        records: Sequence[ManifestRecord],
        config: Any,
        tokenize: Callable[[str], list[int]],
        cache: bool | None = None,
        augmentation: Augmentation | None = None,
    ) -> None:
        self.records = list(records)
        self.config = config
        self.tokenize = tokenize
        self.augmentation = augmentation or Augmentation()
        self.features: FeatureCache | None = None
        self.use_regions = not stem_class(config.stem).takes_pixels
        if self.use_regions:
            missing = [r.id for r in self.records if r.regions is None]
            if missing:
                raise ValueError(
                    f"stem='none' needs a 'regions' .npz for every record; missing for {missing[:3]}"
                )
        self.preprocessor = ImagePreprocessor.from_config(config)
        self.cache = (len(self.records) <= 20000) if cache is None else cache
        self._pixels: dict[tuple[int, int], np.ndarray] = {}  # uint8 [S, S, 3] per (image, view)
        self._regions: dict[int, Regions] = {}

    def __len__(self) -> int:
        return len(self.records)

    def pixels(self, i: int, view: int = 0, keep: bool | None = None) -> np.ndarray:
        """The stem's input for view ``view`` of image ``i``: float32 ``[3, S, S]``. ``keep``: hold
        the decoded picture for the next epoch (default: the store's ``cache``); a feature cache
        being built reads each picture once and keeps nothing."""
        arr = self._pixels.get((i, view))
        if arr is None:
            picture = self.augmentation.view(load_rgb(self.records[i].image), i, view)
            arr = self.preprocessor.pixels(picture)
            if self.cache if keep is None else keep:
                self._pixels[(i, view)] = arr
        return self.preprocessor.normalize(arr)

    def region(self, i: int) -> Regions:
        reg = self._regions.get(i)
        if reg is None:
            path = self.records[i].regions
            assert path is not None
            reg = load_regions(path)
            if self.cache:
                self._regions[i] = reg
        return reg

    def image_batch(
        self, indices: Sequence[int], views: Sequence[int] | None = None
    ) -> tuple[torch.Tensor | None, RegionBatch | None]:
        """Pixels ``[B, 3, S, S]`` or regions of images ``indices`` (in ``views``; default view 0)."""
        if self.features is not None:
            return None, self._cached_regions(indices, views)
        if self.use_regions:
            regs = [self.region(i) for i in indices]
            return None, collate_regions(
                regs,
                self.tokenize,
                feature_dim=self.config.region_feature_dim,
                max_regions=self.config.max_regions,
                max_label_tokens=self.config.max_label_tokens,
            )
        views = views if views is not None else [0] * len(indices)
        return torch.from_numpy(self.pixel_batch(list(zip(indices, views, strict=True)))), None

    def pixel_batch(self, pairs: Sequence[tuple[int, int]], keep: bool | None = None) -> np.ndarray:
        """``pixels`` of each (image, view) pair stacked, ``[B, 3, S, S]``, by the loader threads
        (decoding and augmenting release the GIL): a training step and a feature cache's build
        wait for them."""
        if len(pairs) > 1 and LOADER_THREADS > 1:
            arrays = list(_loader().map(lambda pair: self.pixels(*pair, keep=keep), pairs))
        else:
            arrays = [self.pixels(i, v, keep=keep) for i, v in pairs]
        return np.stack(arrays)

    def _cached_regions(self, indices: Sequence[int], views: Sequence[int] | None) -> RegionBatch:
        """The cached stem output as a ``RegionBatch``: every grid cell a region, no labels."""
        assert self.features is not None
        feats = self.features.regions(indices, views)  # [B, n, d]
        b, n = feats.shape[:2]
        locs = box_locations(self.features.boxes).unsqueeze(0).expand(b, -1, -1)  # [B, n, 6]
        no_labels = torch.zeros(b, 1, dtype=torch.long)
        return RegionBatch(feats, locs, torch.ones(b, n, dtype=torch.bool), no_labels, no_labels.bool())

    def pick_views(self, rng: np.random.Generator) -> np.ndarray:
        """One view per image for an epoch (all 0 without augmentation); a feature cache may hold
        more views than this run asks for, and only the first ones are read."""
        return rng.integers(0, self.augmentation.views, size=len(self))


def make_batch(
    store: ImageStore,
    indices: Sequence[int],
    captions_per_image: int,
    rng: np.random.Generator,
    views: Sequence[int] | None = None,
) -> Batch:
    """Images ``indices`` (in ``views``) with up to ``captions_per_image`` of their captions each
    (chosen by ``rng``)."""
    tokens: list[list[int]] = []
    targets: list[int] = []
    for pos, i in enumerate(indices):
        caps = store.records[i].captions
        if len(caps) > captions_per_image:
            caps = [caps[j] for j in sorted(rng.choice(len(caps), captions_per_image, replace=False))]
        for c in caps:
            tokens.append(store.tokenize(c))
            targets.append(pos)
    ids, mask = pad_queries(tokens)
    pixels, regions = store.image_batch(indices, views)
    return Batch(ids, mask, torch.tensor(targets, dtype=torch.long), pixels, regions)


def epoch_order(n: int, seed: int, epoch: int) -> np.ndarray:
    """Shuffled image order of one epoch: a function of (seed, epoch) only, so resume replays it."""
    return np.random.default_rng([seed, epoch]).permutation(n)
