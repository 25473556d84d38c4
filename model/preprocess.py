"""Pixels for the vision stem: numpy + PIL only, so indexer worker processes never import torch."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from PIL import Image


@dataclass(frozen=True)
class ImagePreprocessor:
    """RGB PIL image -> float32 ``[3, S, S]``: resize (bicubic, no crop), scale to [0,1], normalize.

    No cropping: a search index must see the whole image (an object at the edge is still in it).
    """

    image_size: int = 64
    mean: tuple[float, float, float] = (0.5, 0.5, 0.5)
    std: tuple[float, float, float] = (0.5, 0.5, 0.5)
    _mean: np.ndarray = field(init=False, repr=False, compare=False)
    _std: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.image_size <= 0:
            raise ValueError(f"image_size must be positive, got {self.image_size}")
        if len(self.mean) != 3 or len(self.std) != 3 or min(self.std) <= 0:
            raise ValueError("mean and std need 3 values each, std > 0")
        object.__setattr__(self, "mean", tuple(float(x) for x in self.mean))
        object.__setattr__(self, "std", tuple(float(x) for x in self.std))
        object.__setattr__(self, "_mean", np.asarray(self.mean, dtype=np.float32).reshape(3, 1, 1))
        object.__setattr__(self, "_std", np.asarray(self.std, dtype=np.float32).reshape(3, 1, 1))

    @classmethod
    def from_config(cls, config: object) -> ImagePreprocessor:
        """From a ``VisualSpartaConfig`` (duck-typed so this module needs no transformers either)."""
        return cls(
            image_size=int(config.image_size),  # type: ignore[attr-defined]
            mean=tuple(config.image_mean),  # type: ignore[attr-defined]
            std=tuple(config.image_std),  # type: ignore[attr-defined]
        )

    def __call__(self, image: Image.Image) -> np.ndarray:
        return self.normalize(self.pixels(image))

    def pixels(self, image: Image.Image, reducing_gap: float | None = None) -> np.ndarray:
        """The resized picture as uint8 ``[S, S, 3]``: what decode workers hand over (4x smaller
        than float32), normalized later where the model runs.

        ``reducing_gap`` (Pillow): shrink by an integer factor first, then resample the rest;
        3.0 is indistinguishable from a full bicubic resample at a fraction of its cost.
        """
        if image.mode != "RGB":
            image = image.convert("RGB")
        size = (self.image_size, self.image_size)
        if image.size != size:
            image = image.resize(size, Image.Resampling.BICUBIC, reducing_gap=reducing_gap)
        return np.asarray(image, dtype=np.uint8)

    def normalize(self, pixels: np.ndarray) -> np.ndarray:
        """uint8 ``[S, S, 3]`` -> float32 ``[3, S, S]`` scaled to [0, 1] and normalized.

        ``vsparta.model.encode.TermEncoder`` does the same arithmetic on the device; keep them in step.
        """
        arr = np.asarray(pixels, dtype=np.float32).transpose(2, 0, 1) / 255.0  # [3, S, S]
        return ((arr - self._mean) / self._std).astype(np.float32, copy=False)

    def batch(self, images: Sequence[Image.Image]) -> np.ndarray:
        """``[B, 3, S, S]`` float32."""
        if not images:
            return np.zeros((0, 3, self.image_size, self.image_size), dtype=np.float32)
        return np.stack([self(im) for im in images])
