"""Image augmentation in fixed views, so that a model cannot learn its generator's exact look.

Why: trained on scenes of one renderer, a model learns that renderer's object sizes, angles and
backgrounds (docs/quality.md: a different rendering of the same objects lost half the recall).
Each training image gets ``views`` fixed versions: view 0 is the image itself, the others are
zoomed in (a crop) or out (the picture shrunk onto a flat colour), turned, and changed in
brightness and contrast. A view is a function of (seed, image index, view), so a frozen stem's
regions can be computed once per view (``model.feature_cache``) and a trained stem sees the same
views; training picks one view per image and epoch.

What the views never show, on purpose: drop shadows, gradient or noise backgrounds (the shift split
of the object scenes keeps those for testing, ``scenes/object_shift.py``). No mirror image:
captions say "left of". Torch-free (PIL and numpy), like the rest of preprocessing.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from PIL import Image, ImageEnhance


@dataclass(frozen=True)
class Augmentation:
    """How many views per image and the ranges each augmented view is drawn from."""

    views: int = 1  # 1: no augmentation (view 0 only)
    scale: tuple[float, float] = (0.7, 1.3)  # < 1 zooms out onto a flat colour, > 1 crops in
    rotation: float = 20.0  # degrees either way
    brightness: float = 0.2  # factor in [1 - b, 1 + b]
    contrast: float = 0.2
    seed: int = 0

    def __post_init__(self) -> None:
        if self.views < 1:
            raise ValueError(f"augmentation views must be >= 1, got {self.views}")
        low, high = self.scale
        if not 0 < low <= high:
            raise ValueError(f"augmentation scale must be a range 0 < low <= high, got {self.scale}")
        if not 0 <= self.rotation <= 180 or not 0 <= self.brightness < 1 or not 0 <= self.contrast < 1:
            raise ValueError("augmentation: rotation in [0, 180] degrees, brightness and contrast in [0, 1)")

    def key(self) -> dict[str, Any]:
        """What the views depend on (part of a feature cache's key)."""
        return asdict(self) if self.views > 1 else {"views": 1}

    def view(self, image: Image.Image, index: int, view: int) -> Image.Image:
        """View ``view`` of the training image at ``index`` (view 0: the image unchanged)."""
        if view == 0 or self.views == 1:
            return image
        rng = np.random.default_rng([self.seed, index, view])
        image = image.convert("RGB")
        fill = tuple(int(c) for c in rng.integers(0, 256, 3))
        image = _zoom(image, float(rng.uniform(*self.scale)), rng, fill)
        angle = float(rng.uniform(-self.rotation, self.rotation))
        image = image.rotate(angle, resample=Image.Resampling.BICUBIC, fillcolor=fill)
        image = ImageEnhance.Brightness(image).enhance(
            1 + float(rng.uniform(-self.brightness, self.brightness))
        )
        return ImageEnhance.Contrast(image).enhance(1 + float(rng.uniform(-self.contrast, self.contrast)))


def zoom_range(text: str) -> tuple[float, float]:
    """``--augment-scale LOW,HIGH`` as a range ``0 < LOW <= HIGH`` (argparse says what is wrong)."""
    try:
        low, high = (float(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected LOW,HIGH such as 0.7,1.3, got {text!r}") from None
    if not 0 < low <= high < float("inf"):
        raise argparse.ArgumentTypeError(f"the zoom range needs 0 < LOW <= HIGH, got {text!r}")
    return low, high


def _zoom(image: Image.Image, scale: float, rng: np.random.Generator, fill: tuple[int, ...]) -> Image.Image:
    """The picture ``scale`` times as large in a frame of the same size: cropped (> 1) or shrunk
    onto ``fill`` at a random place (< 1)."""
    w, h = image.size
    if scale >= 1:
        cw, ch = max(1, round(w / scale)), max(1, round(h / scale))
        x, y = int(rng.integers(0, w - cw + 1)), int(rng.integers(0, h - ch + 1))
        return image.crop((x, y, x + cw, y + ch)).resize((w, h), Image.Resampling.BICUBIC)
    sw, sh = max(1, round(w * scale)), max(1, round(h * scale))
    canvas = Image.new("RGB", (w, h), fill)
    x, y = int(rng.integers(0, w - sw + 1)), int(rng.integers(0, h - sh + 1))
    canvas.paste(image.resize((sw, sh), Image.Resampling.BICUBIC), (x, y))
    return canvas
