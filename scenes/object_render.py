"""Where the objects of a scene go and how they are drawn.

A scene is laid out on a 3 x 3 grid of cells (so at most ``MAX_OBJECTS`` objects fit); each object
is jittered inside its cell, scaled (small or large, +-15 %) and rotated (+-25 degrees), so large
neighbours overlap and later objects partly hide earlier ones (the hidden share is recorded). The
background is the shape scenes' textured, shaded one, so the two benchmarks differ only in what
stands on it. That is the ``SEEN`` style of every split but one; the shift split draws the same
layouts in a style no training scene has (``scenes/object_shift.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image

from vsparta.scenes.emoji_catalog import glyph
from vsparta.scenes.shape_render import draw_background

GRID = 3
MAX_OBJECTS = GRID * GRID
MIN_IMAGE_SIZE = 32
SIZES = {"small": 0.75, "large": 1.35}  # object side as a fraction of a cell's side
_JITTER = 0.22  # of a cell's side
_ROWS = ("top", "middle", "bottom")
_COLUMNS = ("left", "center", "right")


@dataclass(frozen=True)
class Placed:
    """One drawn object: which catalog entry, its cell and its size word."""

    index: int
    cell: int  # row * GRID + column
    size: str

    @property
    def row(self) -> int:
        return self.cell // GRID

    @property
    def column(self) -> int:
        return self.cell % GRID

    def position(self) -> str:
        """'top left', 'center', 'bottom' ... the words a caption uses for the cell."""
        row, col = _ROWS[self.row], _COLUMNS[self.column]
        if row == "middle":
            return "center" if col == "center" else col
        return row if col == "center" else f"{row} {col}"


def relation(a: Placed, b: Placed) -> str | None:
    """A true spatial relation of a to b, read from the cells (never borderline)."""
    if a.row == b.row and a.column < b.column:
        return "left of"
    if a.row == b.row and a.column > b.column:
        return "right of"
    if a.column == b.column and a.row < b.row:
        return "above"
    if a.column == b.column and a.row > b.row:
        return "below"
    if max(abs(a.row - b.row), abs(a.column - b.column)) == 1:
        return "next to"
    return None


class Style:
    """How objects and background are drawn: the training scenes' look (``SEEN``)."""

    name = "seen"

    def background(self, rng: np.random.Generator, size: int) -> tuple[np.ndarray, str, list[int]]:
        """Pixels ``[S, S, 3]`` float32, the texture's name and the base colour."""
        return draw_background(rng, size)

    def side(self, rng: np.random.Generator, size_word: str, cell: float) -> float:
        """An object's side in pixels, for a cell ``cell`` pixels wide."""
        return cell * SIZES[size_word] * rng.uniform(0.85, 1.15)

    def angle(self, rng: np.random.Generator) -> float:
        return float(rng.uniform(-25, 25))

    def decorate(self, canvas: Image.Image, picture: Image.Image, at: tuple[int, int], side: int) -> None:
        """Anything drawn under an object before it is pasted (nothing here)."""


SEEN = Style()


def render_objects(
    rng: np.random.Generator, placed: Sequence[Placed], chars: Sequence[str], size: int, style: Style = SEEN
) -> tuple[Image.Image, dict[str, Any], list[dict[str, Any]]]:
    """Draw the objects in order; returns the image, background info and per-object boxes and the
    share of each object hidden by the ones drawn after it."""
    pixels, texture, bg = style.background(rng, size)
    canvas = Image.fromarray(np.clip(pixels + 0.5, 0, 255).astype(np.uint8), mode="RGB")
    cell = size / GRID
    owner = np.full((size, size), -1, dtype=np.int16)
    boxes: list[list[int]] = []
    areas: list[int] = []
    for k, (p, char) in enumerate(zip(placed, chars, strict=True)):
        side = max(4, int(round(style.side(rng, p.size, cell))))
        picture = glyph(char)
        scale = side / max(picture.size)
        picture = picture.resize(
            (max(1, round(picture.width * scale)), max(1, round(picture.height * scale))),
            Image.Resampling.LANCZOS,
        ).rotate(style.angle(rng), resample=Image.Resampling.BICUBIC, expand=True)
        cx = (p.column + 0.5 + rng.uniform(-_JITTER, _JITTER)) * cell
        cy = (p.row + 0.5 + rng.uniform(-_JITTER, _JITTER)) * cell
        x0, y0 = int(round(cx - picture.width / 2)), int(round(cy - picture.height / 2))
        style.decorate(canvas, picture, (x0, y0), side)
        canvas.paste(picture, (x0, y0), picture)
        alpha = np.zeros((size, size), dtype=bool)
        full = np.asarray(picture.getchannel("A")) > 127
        sx0, sy0 = max(0, x0), max(0, y0)
        sx1, sy1 = min(size, x0 + picture.width), min(size, y0 + picture.height)
        if sx1 > sx0 and sy1 > sy0:
            alpha[sy0:sy1, sx0:sx1] = full[sy0 - y0 : sy1 - y0, sx0 - x0 : sx1 - x0]
        owner[alpha] = k
        areas.append(int(alpha.sum()))
        ys, xs = np.nonzero(alpha)
        boxes.append([int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1] if len(xs) else [])
    drawn = [
        {"box": box, "hidden": round(1.0 - int((owner == k).sum()) / area, 3) if area else 1.0}
        for k, (box, area) in enumerate(zip(boxes, areas, strict=True))
    ]
    noisy = np.asarray(canvas, dtype=np.float32)
    noisy += rng.standard_normal(noisy.shape, dtype=np.float32) * np.float32(rng.uniform(1, 5))
    image = Image.fromarray(np.clip(noisy + 0.5, 0, 255).astype(np.uint8), mode="RGB")
    return image, {"colour": bg, "texture": texture}, drawn
