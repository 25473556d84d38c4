"""The shift split's look: the training objects, drawn as no training scene draws them.

Why: a model's recall on fresh scenes of its own generator measures how well it learnt that
generator. The shift split keeps the objects, words and layouts of the seen splits and changes
everything a renderer decides: objects smaller or larger than any training size, turned further
than any training angle, each with a drop shadow, on a strong two-colour gradient or a coloured
noise background instead of the training scenes' muted textures, and captioned by templates no
training caption uses (``scenes/object_captions.py``, ``SHIFT_TEMPLATES``). Neither the training
scenes nor the training augmentation (``model/augment.py``: flat-colour fill only) ever shows a
shadow, a gradient or a noise background.
"""

from __future__ import annotations

import colorsys

import numpy as np
from PIL import Image, ImageFilter

from vsparta.scenes.object_render import Style

# object side as a share of a cell's side: training draws 0.64-0.86 (small) and 1.15-1.55 (large)
SHIFT_SIZES = {"small": (0.5, 0.62), "large": (1.6, 1.8)}
SHIFT_ANGLES = (30.0, 45.0)  # either way; training turns objects by at most 25 degrees
SHADOW_OFFSET = 0.09  # of the object's side, down and to the right
SHADOW_OPACITY = 0.55


def _vivid(rng: np.random.Generator, saturation: tuple[float, float] = (0.5, 0.9)) -> np.ndarray:
    """A saturated, bright colour (training backgrounds are muted: saturation <= 0.3)."""
    return (
        np.array(colorsys.hsv_to_rgb(rng.random(), rng.uniform(*saturation), rng.uniform(0.7, 1.0))) * 255.0
    )


def gradient_background(rng: np.random.Generator, size: int) -> np.ndarray:
    """A linear blend between two vivid colours across the image, at a random angle."""
    ramp = np.arange(size, dtype=np.float32) / max(1, size - 1)
    theta = rng.uniform(0, 2 * np.pi)
    t = np.cos(theta) * (ramp[None, :] - 0.5) + np.sin(theta) * (ramp[:, None] - 0.5)
    t = (t - t.min()) / max(float(t.max() - t.min()), 1e-6)
    a, b = _vivid(rng), _vivid(rng)
    return (a[None, None, :] * (1 - t[..., None]) + b[None, None, :] * t[..., None]).astype(np.float32)


def noise_background(rng: np.random.Generator, size: int) -> np.ndarray:
    """Smooth colour noise: a coarse grid of vivid colours, upsampled, plus fine grain."""
    cells = int(rng.integers(3, 6))
    coarse = np.stack([_vivid(rng, (0.35, 0.7)) for _ in range(cells * cells)]).reshape(cells, cells, 3)
    channels = [
        np.asarray(
            Image.fromarray(coarse[..., c].astype(np.float32), mode="F").resize(
                (size, size), Image.Resampling.BICUBIC
            )
        )
        for c in range(3)
    ]
    grain = rng.standard_normal((size, size, 1), dtype=np.float32) * np.float32(rng.uniform(4, 10))
    return np.stack(channels, axis=-1).astype(np.float32) + grain


class ShiftStyle(Style):
    """Sizes and angles outside the training ranges, drop shadows, gradient or noise backgrounds.

    Each change can be left out (``bench/shift_parts.py`` measures what each one costs a model);
    the split itself makes them all, with its own caption frames (``templates``)."""

    name = "shift"

    def __init__(
        self,
        sizes: bool = True,
        angles: bool = True,
        shadow: bool = True,
        background: bool = True,
        templates: bool = True,
    ) -> None:
        self.changes = {"sizes": sizes, "angles": angles, "shadow": shadow, "background": background}
        self.templates = templates  # the shift split's caption frames (scenes/object_captions.py)

    def background(self, rng: np.random.Generator, size: int) -> tuple[np.ndarray, str, list[int]]:
        if not self.changes["background"]:
            return super().background(rng, size)
        kind = str(rng.choice(["gradient", "noise"]))
        pixels = gradient_background(rng, size) if kind == "gradient" else noise_background(rng, size)
        return pixels, kind, [int(round(float(v))) for v in pixels.reshape(-1, 3).mean(axis=0)]

    def side(self, rng: np.random.Generator, size_word: str, cell: float) -> float:
        if not self.changes["sizes"]:
            return super().side(rng, size_word, cell)
        return cell * float(rng.uniform(*SHIFT_SIZES[size_word]))

    def angle(self, rng: np.random.Generator) -> float:
        if not self.changes["angles"]:
            return super().angle(rng)
        return float(rng.choice([-1.0, 1.0]) * rng.uniform(*SHIFT_ANGLES))

    def decorate(self, canvas: Image.Image, picture: Image.Image, at: tuple[int, int], side: int) -> None:
        """A soft dark copy of the object's outline, offset down and right, under the object."""
        if not self.changes["shadow"]:
            return
        alpha = picture.getchannel("A").point(lambda a: int(a * SHADOW_OPACITY))
        alpha = alpha.filter(ImageFilter.GaussianBlur(max(1.0, side * 0.06)))
        shadow = Image.new("RGB", picture.size, (0, 0, 0))
        offset = max(1, round(side * SHADOW_OFFSET))
        canvas.paste(shadow, (at[0] + offset, at[1] + offset), alpha)


SHIFT = ShiftStyle()
