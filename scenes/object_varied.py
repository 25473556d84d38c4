"""A training look with varied backgrounds: the seen textures, half of them in vivid colours.

Why: every training scene sits on a muted (saturation <= 0.3), low-contrast texture, so a model can
learn that anything vivid or high-contrast is an object. The shift split's backgrounds are vivid
and cost a model trained on the seen look a tenth of its recall (docs/index-scales.md, "only
background"). Domain randomisation is the usual cure: draw training backgrounds so varied that
their colour and contrast carry nothing. This look keeps the seen families (stripes, checks,
blotches, speckles: the captions name them) and, for half of the scenes, draws them in colours of
any hue, saturation and brightness at full contrast.

What it never shows, so the shift split stays unseen: a blend between two colours across the image
(``scenes.object_shift.gradient_background``), coloured noise of several hues
(``noise_background``), drop shadows, other object sizes or angles. Only the training split is
drawn this way (``generate_object_scenes(train_look=VARIED)``); validation and test keep the seen
look, so their figures compare with any other run's.
"""

from __future__ import annotations

import colorsys
import math

import numpy as np
from PIL import Image

from vsparta.scenes.object_render import SEEN, Style

VIVID_SHARE = 0.5  # of the training scenes; the others keep the seen, muted background


def _colour(rng: np.random.Generator) -> np.ndarray:
    """Any hue, saturated or not, bright or dark: the seen look only ever has muted mid-tones."""
    rgb = colorsys.hsv_to_rgb(rng.random(), rng.uniform(0.3, 1.0), rng.uniform(0.25, 1.0))
    return np.array(rgb, dtype=np.float32) * 255.0


def vivid_background(rng: np.random.Generator, size: int) -> tuple[np.ndarray, str, list[int]]:
    """One of the seen texture families at full contrast: two colours in stripes or checks, or one
    colour's blotches or speckles far stronger than the seen ones."""
    ramp = np.arange(size, dtype=np.float32) / size
    xx, yy = ramp[None, :], ramp[:, None]
    a, b = _colour(rng), _colour(rng)
    texture = str(rng.choice(["stripes", "checks", "blotches", "speckles"]))
    if texture in ("stripes", "checks"):
        if texture == "stripes":
            theta, freq = rng.uniform(0, 2 * math.pi), rng.uniform(3, 10)
            mix = np.sin(2 * math.pi * freq * (np.cos(theta) * xx + np.sin(theta) * yy)) > 0
        else:
            cells = int(rng.integers(3, 9))
            mix = ((xx * cells).astype(int) + (yy * cells).astype(int)) % 2 == 1
        pixels = np.where(mix[..., None], a[None, None, :], b[None, None, :])
    elif texture == "blotches":
        small = rng.normal(0, 1, (6, 6)).astype(np.float32)
        up = np.asarray(Image.fromarray(small, mode="F").resize((size, size), Image.Resampling.BICUBIC))
        pixels = a[None, None, :] + (up * rng.uniform(30, 60))[..., None]
    else:
        grain = rng.standard_normal((size, size), dtype=np.float32) * np.float32(rng.uniform(20, 40))
        pixels = a[None, None, :] + grain[..., None]
    pixels = np.clip(np.broadcast_to(pixels, (size, size, 3)), 0, 255).astype(np.float32)
    return pixels, texture, [int(round(float(v))) for v in pixels.reshape(-1, 3).mean(axis=0)]


class VariedStyle(Style):
    """The seen look, but half of the backgrounds vivid (``vivid_background``)."""

    name = "varied"

    def background(self, rng: np.random.Generator, size: int) -> tuple[np.ndarray, str, list[int]]:
        if rng.random() < VIVID_SHARE:
            return vivid_background(rng, size)
        return super().background(rng, size)


VARIED = VariedStyle()
TRAIN_LOOKS = {"seen": SEEN, "varied": VARIED}  # the training looks a command may name
