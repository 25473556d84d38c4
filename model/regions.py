"""Precomputed detector regions (the paper's input): features, boxes and optional labels per image.

One ``.npz`` per image: ``features [n, d]``, ``boxes [n, 4]`` (x1, y1, x2, y2 in pixels or
normalized), optional ``labels`` (strings: object labels with attributes, e.g. "red cube").
Loading is numpy-only; ``collate_regions`` imports torch lazily.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch


@dataclass
class Regions:
    """One image as regions. ``boxes`` are normalized x1, y1, x2, y2 in [0, 1]."""

    features: np.ndarray  # [n, d] float32
    boxes: np.ndarray  # [n, 4] float32
    labels: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.features = np.asarray(self.features, dtype=np.float32)
        self.boxes = np.asarray(self.boxes, dtype=np.float32)
        if self.features.ndim != 2:
            raise ValueError(f"features must be [n, d], got shape {self.features.shape}")
        if self.boxes.shape != (self.features.shape[0], 4):
            raise ValueError(
                f"boxes must be [n, 4] with n = {self.features.shape[0]}, got {self.boxes.shape}"
            )
        if not np.isfinite(self.features).all() or not np.isfinite(self.boxes).all():
            raise ValueError("features and boxes must be finite (found NaN or inf)")
        if self.boxes.size and (self.boxes.min() < -1e-4 or self.boxes.max() > 1 + 1e-4):
            raise ValueError("Regions.boxes must be normalized to [0, 1]; use normalize_boxes() first")
        self.labels = [str(x) for x in self.labels]


def normalize_boxes(boxes: np.ndarray, image_size: int | tuple[int, int] | None = None) -> np.ndarray:
    """Pixel or normalized x1,y1,x2,y2 -> normalized, clipped to [0, 1].

    Boxes whose largest coordinate exceeds 1 are pixels; without ``image_size`` (width, height) the
    largest x2 / y2 stands in for the image's extent (detectors rarely leave the far edges empty).
    """
    boxes = np.asarray(boxes, dtype=np.float32)
    if boxes.ndim != 2 or boxes.shape[1] != 4:
        raise ValueError(f"boxes must be [n, 4] (x1, y1, x2, y2), got shape {boxes.shape}")
    if not np.isfinite(boxes).all():
        raise ValueError("boxes contain NaN or inf")
    if boxes.size == 0:
        return boxes.reshape(0, 4)
    if (boxes[:, 2] < boxes[:, 0]).any() or (boxes[:, 3] < boxes[:, 1]).any():
        raise ValueError("boxes must be x1, y1, x2, y2 with x2 >= x1 and y2 >= y1")
    if boxes.max() > 1.0 + 1e-4:
        if image_size is None:
            width, height = float(boxes[:, 2].max()), float(boxes[:, 3].max())
        elif isinstance(image_size, int):
            width = height = float(image_size)
        else:
            width, height = float(image_size[0]), float(image_size[1])
        if width <= 0 or height <= 0:
            raise ValueError(f"image size must be positive, got {(width, height)}")
        boxes = boxes / np.asarray([width, height, width, height], dtype=np.float32)
    return np.clip(boxes, 0.0, 1.0)


def load_regions(path: str | Path, image_size: int | tuple[int, int] | None = None) -> Regions:
    """Read one ``.npz``; errors name the file and what is wrong with it."""
    path = Path(path)
    try:
        data = np.load(path, allow_pickle=False)
    except (OSError, EOFError, ValueError) as exc:
        raise ValueError(f"{path}: not a readable .npz file ({exc})") from None
    with data:
        missing = {"features", "boxes"} - set(data.files)
        if missing:
            raise ValueError(f"{path}: missing arrays {sorted(missing)} (has {sorted(data.files)})")
        try:
            features = np.asarray(data["features"], dtype=np.float32)
            boxes = np.asarray(data["boxes"])
            labels = [str(x) for x in data["labels"].tolist()] if "labels" in data.files else []
        except ValueError as exc:  # e.g. labels saved as an object array (pickled)
            raise ValueError(
                f"{path}: {exc} (save numbers as numeric arrays, labels as np.array(labels, dtype=str))"
            ) from None
    try:
        if features.ndim != 2:
            raise ValueError(f"features must be [n, d], got shape {features.shape}")
        if not np.isfinite(features).all():
            raise ValueError("features contain NaN or inf")
        return Regions(features, normalize_boxes(boxes, image_size), labels)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None


def save_regions(path: str | Path, regions: Regions) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(
        path, features=regions.features, boxes=regions.boxes, labels=np.asarray(regions.labels, dtype=str)
    )
    return path


def location_features(boxes: np.ndarray) -> np.ndarray:
    """Normalized x1,y1,x2,y2 ``[n, 4]`` -> ``[n, 6]`` = [xmin, xmax, ymin, ymax, w, h] (paper Eq. 3)."""
    x1, y1, x2, y2 = boxes[:, 0], boxes[:, 1], boxes[:, 2], boxes[:, 3]
    return np.stack([x1, x2, y1, y2, x2 - x1, y2 - y1], axis=1).astype(np.float32)


@dataclass
class RegionBatch:
    """Padded tensors for a batch of images given as regions."""

    features: torch.Tensor  # [B, n_max, d]
    locations: torch.Tensor  # [B, n_max, 6]
    region_mask: torch.Tensor  # [B, n_max] bool
    label_ids: torch.Tensor  # [B, k_max] long
    label_mask: torch.Tensor  # [B, k_max] bool

    def to(self, device: torch.device | str) -> RegionBatch:
        return RegionBatch(*(t.to(device) for t in self.astuple()))

    def astuple(self) -> tuple[torch.Tensor, ...]:
        return (self.features, self.locations, self.region_mask, self.label_ids, self.label_mask)


def label_token_ids(
    labels: Sequence[str], tokenize: Callable[[str], list[int]], max_tokens: int
) -> list[int]:
    """All labels of one image as one token sequence (paper Eq. 6-7: k tokens for n regions)."""
    ids: list[int] = []
    for label in labels:
        ids.extend(tokenize(label))
        if len(ids) >= max_tokens:
            break
    return ids[:max_tokens]


def collate_regions(
    batch: Sequence[Regions],
    tokenize: Callable[[str], list[int]] | None,
    feature_dim: int,
    max_regions: int,
    max_label_tokens: int,
) -> RegionBatch:
    """Pad to the longest image in the batch (at least one slot so shapes stay valid)."""
    import torch

    for r in batch:
        if r.features.shape[1] != feature_dim:
            raise ValueError(
                f"region features have dimension {r.features.shape[1]}, the model expects {feature_dim}"
            )
    n_max = max(1, max((min(len(r.features), max_regions) for r in batch), default=1))
    labels = [
        label_token_ids(r.labels, tokenize, max_label_tokens) if (tokenize and r.labels) else []
        for r in batch
    ]
    k_max = max(1, max((len(x) for x in labels), default=1))
    b = len(batch)
    feats = torch.zeros(b, n_max, feature_dim)
    locs = torch.zeros(b, n_max, 6)
    rmask = torch.zeros(b, n_max, dtype=torch.bool)
    lids = torch.zeros(b, k_max, dtype=torch.long)
    lmask = torch.zeros(b, k_max, dtype=torch.bool)
    for i, r in enumerate(batch):
        n = min(len(r.features), max_regions)
        if n:
            feats[i, :n] = torch.from_numpy(r.features[:n])
            locs[i, :n] = torch.from_numpy(location_features(r.boxes[:n]))
            rmask[i, :n] = True
        if labels[i]:
            lids[i, : len(labels[i])] = torch.tensor(labels[i], dtype=torch.long)
            lmask[i, : len(labels[i])] = True
    return RegionBatch(feats, locs, rmask, lids, lmask)
