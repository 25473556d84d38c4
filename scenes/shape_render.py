"""Pixels of a scene: anti-aliased shapes on a textured, shaded, noisy background."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

from vsparta.scenes.shape_objects import COLOURS, POSITIONS, SceneObject

_SUPERSAMPLE = 4  # shapes are drawn 4x larger and box-filtered down: anti-aliased edges
_LARGE, _SMALL = 0.30, 0.16  # object diameter as a fraction of the image side
_JITTER = 0.035


def _polygon(shape: str, cx: float, cy: float, r: float, angle: float) -> list[tuple[float, float]]:
    def ring(radii: Sequence[float], start: float) -> list[tuple[float, float]]:
        k = len(radii)
        return [
            (cx + rr * math.cos(start + 2 * math.pi * t / k), cy + rr * math.sin(start + 2 * math.pi * t / k))
            for t, rr in enumerate(radii)
        ]

    if shape == "square":
        return ring([r * 0.95] * 4, math.pi / 4 + angle)
    if shape == "triangle":
        pts = ring([r * 1.1] * 3, -math.pi / 2 + angle)
        return [(x, y + 0.12 * r) for x, y in pts]
    if shape == "star":
        return ring([r * 1.1, r * 0.45] * 5, -math.pi / 2 + angle)
    if shape == "hexagon":
        return ring([r] * 6, angle)
    if shape == "diamond":
        pts = [(0.0, -1.1 * r), (0.62 * r, 0.0), (0.0, 1.1 * r), (-0.62 * r, 0.0)]
    elif shape == "cross":
        w, L = 0.34 * r, r
        pts = [(-w, -L), (w, -L), (w, -w), (L, -w), (L, w), (w, w)]
        pts += [(-x, -y) for x, y in pts]
    else:
        raise ValueError(f"unknown shape {shape!r}")
    c, s = math.cos(angle), math.sin(angle)
    return [(cx + x * c - y * s, cy + x * s + y * c) for x, y in pts]


def draw_background(rng: np.random.Generator, size: int) -> tuple[np.ndarray, str, list[int]]:
    """A muted colour with a gradient and one texture, so the background is never flat."""
    hue, sat, val = rng.random(), rng.uniform(0.05, 0.3), rng.uniform(0.4, 0.68)
    base = np.array(_hsv_to_rgb(hue, sat, val)) * 255.0
    ramp = np.arange(size, dtype=np.float32) / size
    xx, yy = ramp[None, :], ramp[:, None]
    theta = rng.uniform(0, 2 * math.pi)
    grad = (np.cos(theta) * (xx - 0.5) + np.sin(theta) * (yy - 0.5)) * rng.uniform(10, 35)
    texture = str(rng.choice(["stripes", "checks", "blotches", "speckles"]))
    if texture == "stripes":
        freq, phase = rng.uniform(4, 12), rng.uniform(0, 2 * math.pi)
        d = np.cos(theta + 1.0) * xx + np.sin(theta + 1.0) * yy
        tex = np.sin(2 * math.pi * freq * d + phase) * rng.uniform(6, 14)
    elif texture == "checks":
        cells = int(rng.integers(4, 10))
        tex = (((xx * cells).astype(int) + (yy * cells).astype(int)) % 2 - 0.5) * rng.uniform(8, 18)
    elif texture == "blotches":
        small = rng.normal(0, 1, (6, 6)).astype(np.float32)
        up = Image.fromarray(small, mode="F").resize((size, size), Image.Resampling.BICUBIC)
        tex = np.asarray(up) * rng.uniform(8, 15)
    else:
        tex = rng.standard_normal((size, size), dtype=np.float32) * np.float32(rng.uniform(6, 12))
    img = base.astype(np.float32)[None, None, :] + np.broadcast_to(grad + tex, (size, size))[..., None]
    return img.astype(np.float32), texture, [int(round(v)) for v in base]


def _hsv_to_rgb(h: float, s: float, v: float) -> tuple[float, float, float]:
    i = int(h * 6) % 6
    f = h * 6 - int(h * 6)
    p, q, t = v * (1 - s), v * (1 - f * s), v * (1 - (1 - f) * s)
    return [(v, t, p), (q, v, p), (p, v, t), (p, q, v), (t, p, v), (v, p, q)][i]


def render_scene(
    rng: np.random.Generator, objects: Sequence[SceneObject], size: int
) -> tuple[Image.Image, dict[str, Any], list[dict[str, Any]]]:
    """Draw the scene; returns the image, background info and per-object boxes (pixels)."""
    img, texture, bg = draw_background(rng, size)
    light = rng.uniform(-0.08, 0.08, size=2).astype(np.float32)
    ramp = np.arange(size, dtype=np.float32) / size - 0.5
    shade = (1.0 + light[0] * ramp[None, :] + light[1] * ramp[:, None])[..., None]
    s = _SUPERSAMPLE
    placed: list[dict[str, Any]] = []
    for o in objects:
        ax, ay = POSITIONS[o.position]
        cx = (ax + rng.uniform(-_JITTER, _JITTER)) * size
        cy = (ay + rng.uniform(-_JITTER, _JITTER)) * size
        r = (_LARGE if o.size == "large" else _SMALL) * size / 2 * rng.uniform(0.9, 1.1)
        angle = rng.uniform(-0.26, 0.26)  # +-15 degrees: never turns a square into a diamond
        # draw only the object's own patch (supersampled), then box-filter it down
        x0, y0 = max(0, int(cx - 1.3 * r) - 1), max(0, int(cy - 1.3 * r) - 1)
        x1, y1 = min(size, int(cx + 1.3 * r) + 2), min(size, int(cy + 1.3 * r) + 2)
        mask = Image.new("L", ((x1 - x0) * s, (y1 - y0) * s), 0)
        draw = ImageDraw.Draw(mask)
        px, py = cx - x0, cy - y0
        if o.shape == "circle":
            draw.ellipse([(px - r) * s, (py - r) * s, (px + r) * s, (py + r) * s], fill=255)
        else:
            draw.polygon([(x * s, y * s) for x, y in _polygon(o.shape, px, py, r, angle)], fill=255)
        alpha = np.asarray(mask.reduce(s), dtype=np.float32)[..., None] * np.float32(1 / 255)
        colour = (np.array(COLOURS[o.colour]) + rng.uniform(-12, 12, size=3)).astype(np.float32)
        patch = img[y0:y1, x0:x1]
        img[y0:y1, x0:x1] = patch + (colour * shade[y0:y1, x0:x1] - patch) * alpha
        ys, xs = np.nonzero(alpha[..., 0] > 0.5)
        box = (
            [int(xs.min()) + x0, int(ys.min()) + y0, int(xs.max()) + x0 + 1, int(ys.max()) + y0 + 1]
            if len(xs)
            else []
        )
        placed.append({"center": [round(cx, 1), round(cy, 1)], "box": box})
    sigma = np.float32(rng.uniform(2, 7))
    img += rng.standard_normal(img.shape, dtype=np.float32) * sigma
    pixels = np.clip(img + 0.5, 0, 255).astype(np.uint8)
    return Image.fromarray(pixels, mode="RGB"), {"colour": bg, "texture": texture}, placed
