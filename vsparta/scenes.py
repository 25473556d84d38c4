"""A generated text-to-image benchmark: scenes of coloured shapes with five captions each.

Why generated: the demo, the tests and CI need a data set that exists offline, is small, and is
hard in the ways that matter for retrieval. Scenes come in *groups*: a base scene and variants of
it with colours swapped between two objects, positions swapped, the scene mirrored (relations
reversed) or sizes swapped. The variants sit in the same split, so a model that ignores colour,
position or relations cannot tell them apart and loses recall.

Everything is drawn from ``numpy`` generators seeded by (seed, split, group), so the same seed
gives byte-identical images and manifests, and splits can be generated independently.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

from model.manifest import ManifestRecord, write_manifest

log = logging.getLogger(__name__)

SHAPES: tuple[str, ...] = ("circle", "square", "triangle", "star", "diamond", "hexagon", "cross")
COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (215, 35, 35),
    "green": (35, 165, 55),
    "blue": (35, 75, 215),
    "yellow": (240, 215, 35),
    "purple": (135, 55, 175),
    "orange": (245, 135, 25),
    "pink": (245, 125, 190),
    "cyan": (35, 200, 215),
    "white": (248, 248, 248),
    "black": (22, 22, 22),
}
SIZES: tuple[str, ...] = ("small", "large")
# anchor centres as fractions of the image side; objects are jittered around them
POSITIONS: dict[str, tuple[float, float]] = {
    "left": (0.2, 0.5),
    "right": (0.8, 0.5),
    "top": (0.5, 0.2),
    "bottom": (0.5, 0.8),
    "center": (0.5, 0.5),
}
RELATIONS: tuple[str, ...] = (
    "left of",
    "right of",
    "above",
    "below",
    "next to",
    "larger than",
    "smaller than",
)
VARIANTS: tuple[str, ...] = ("colour_swap", "position_swap", "mirror", "size_swap")
SPLITS: tuple[str, ...] = ("train", "val", "test")

# Words used in captions. The canonical word comes first; every word maps back to one value, so
# captions can be checked against the metadata (tests, and the symbolic matchers in scene_oracle).
SHAPE_WORDS: dict[str, tuple[str, ...]] = {
    "circle": ("circle", "disc"),
    "square": ("square", "block"),
    "triangle": ("triangle",),
    "star": ("star",),
    "diamond": ("diamond", "rhombus"),
    "hexagon": ("hexagon",),
    "cross": ("cross",),
}
PLURALS: dict[str, str] = {
    "circle": "circles",
    "disc": "discs",
    "square": "squares",
    "block": "blocks",
    "triangle": "triangles",
    "star": "stars",
    "diamond": "diamonds",
    "rhombus": "rhombuses",
    "hexagon": "hexagons",
    "cross": "crosses",
}
COLOUR_WORDS: dict[str, tuple[str, ...]] = {
    "red": ("red",),
    "green": ("green",),
    "blue": ("blue",),
    "yellow": ("yellow",),
    "purple": ("purple", "violet"),
    "orange": ("orange",),
    "pink": ("pink",),
    "cyan": ("cyan", "turquoise"),
    "white": ("white",),
    "black": ("black",),
}
SIZE_WORDS: dict[str, tuple[str, ...]] = {"small": ("small", "little", "tiny"), "large": ("large", "big")}
POSITION_PHRASES: dict[str, tuple[str, ...]] = {
    "left": ("on the left", "at the left", "on the left side"),
    "right": ("on the right", "at the right", "on the right side"),
    "top": ("at the top", "near the top", "in the upper part"),
    "bottom": ("at the bottom", "near the bottom", "in the lower part"),
    "center": ("in the middle", "in the center", "in the centre"),
}
RELATION_PHRASES: dict[str, tuple[str, ...]] = {
    "left of": ("to the left of", "left of", "on the left of"),
    "right of": ("to the right of", "right of", "on the right of"),
    "above": ("above", "over", "higher than"),
    "below": ("below", "under", "beneath"),
    "next to": ("next to", "beside"),
    "larger than": ("larger than", "bigger than"),
    "smaller than": ("smaller than",),
}
NUMBERS = {1: "one", 2: "two", 3: "three", 4: "four"}

_SUPERSAMPLE = 4  # shapes are drawn 4x larger and box-filtered down: anti-aliased edges
_LARGE, _SMALL = 0.30, 0.16  # object diameter as a fraction of the image side
_JITTER = 0.035


@dataclass(frozen=True)
class SceneObject:
    shape: str
    colour: str
    size: str
    position: str

    def key(self) -> tuple[str, str, str, str]:
        return (self.shape, self.colour, self.size, self.position)


# ----------------------------------------------------------------------------- scene logic


def relations_of(objects: Sequence[SceneObject]) -> list[tuple[int, str, int]]:
    """Every true directed relation (subject index, relation, object index) between objects.

    Computed from the anchor positions, not the jittered pixels, so they are never borderline:
    "left of" means a smaller anchor x, "next to" means one of the two is in the centre (the
    others are two anchor steps apart).
    """
    out: list[tuple[int, str, int]] = []
    for i, a in enumerate(objects):
        for j, b in enumerate(objects):
            if i == j:
                continue
            (ax, ay), (bx, by) = POSITIONS[a.position], POSITIONS[b.position]
            if ax < bx:
                out.append((i, "left of", j))
            if ax > bx:
                out.append((i, "right of", j))
            if ay < by:
                out.append((i, "above", j))
            if ay > by:
                out.append((i, "below", j))
            if "center" in (a.position, b.position):
                out.append((i, "next to", j))
            if a.size == "large" and b.size == "small":
                out.append((i, "larger than", j))
            if a.size == "small" and b.size == "large":
                out.append((i, "smaller than", j))
    return out


def _random_scene(rng: np.random.Generator) -> list[SceneObject]:
    n = int(rng.choice([2, 3, 4], p=[0.3, 0.4, 0.3]))
    positions = list(rng.choice(list(POSITIONS), size=n, replace=False))
    objects: list[SceneObject] = []
    seen: set[tuple[str, str]] = set()
    while len(objects) < n:
        shape = str(rng.choice(SHAPES))
        colour = str(rng.choice(list(COLOURS)))
        if (shape, colour) in seen:  # distinct (shape, colour) so every object can be named
            continue
        seen.add((shape, colour))
        size = str(rng.choice(SIZES))
        objects.append(SceneObject(shape, colour, size, str(positions[len(objects)])))
    return objects


def _pairs(rng: np.random.Generator, n: int) -> list[tuple[int, int]]:
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    rng.shuffle(pairs)
    return pairs


def _variant(rng: np.random.Generator, base: list[SceneObject], kind: str) -> list[SceneObject] | None:
    """The base scene changed in one way that a model blind to that attribute cannot see."""
    objs = list(base)
    if kind == "mirror":
        flip = {"left": "right", "right": "left"}
        if not any(o.position in flip for o in objs):
            flip = {"top": "bottom", "bottom": "top"}
        objs = [replace(o, position=flip.get(o.position, o.position)) for o in objs]
    else:
        for i, j in _pairs(rng, len(objs)):
            a, b = objs[i], objs[j]
            if kind == "colour_swap" and a.colour != b.colour and a.shape != b.shape:
                objs[i], objs[j] = replace(a, colour=b.colour), replace(b, colour=a.colour)
                break
            if kind == "position_swap" and (a.shape, a.colour) != (b.shape, b.colour):
                objs[i], objs[j] = replace(a, position=b.position), replace(b, position=a.position)
                break
            if kind == "size_swap" and a.size != b.size:
                objs[i], objs[j] = replace(a, size=b.size), replace(b, size=a.size)
                break
        else:
            return None
    return objs


def _scene_signature(objects: Sequence[SceneObject]) -> frozenset[tuple[str, str, str, str]]:
    return frozenset(o.key() for o in objects)


def _group(rng: np.random.Generator) -> list[tuple[str, list[SceneObject]]]:
    """A base scene plus 0-3 hard-negative variants of it (most groups have some)."""
    base = _random_scene(rng)
    members: list[tuple[str, list[SceneObject]]] = [("base", base)]
    n_variants = int(rng.choice([0, 1, 2, 3], p=[0.1, 0.25, 0.35, 0.3]))
    seen = {_scene_signature(base)}
    for kind in rng.permutation(VARIANTS):
        if len(members) > n_variants:
            break
        objs = _variant(rng, base, str(kind))
        if objs is None or _scene_signature(objs) in seen:
            continue
        seen.add(_scene_signature(objs))
        members.append((str(kind), objs))
    return members


# ----------------------------------------------------------------------------- captions


def _pick(rng: np.random.Generator, options: Sequence[str]) -> str:
    return str(options[int(rng.integers(len(options)))])


def _article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def _join(parts: Sequence[str]) -> str:
    if len(parts) == 1:
        return parts[0]
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def _describe(rng: np.random.Generator, o: SceneObject, *, size_p: float = 0.4, article: bool = True) -> str:
    words = []
    if rng.random() < size_p:
        words.append(_pick(rng, SIZE_WORDS[o.size]))
    words.append(_pick(rng, COLOUR_WORDS[o.colour]))
    words.append(_pick(rng, SHAPE_WORDS[o.shape]))
    text = " ".join(words)
    return f"{_article(text)} {text}" if article else text


def _cap_full(rng: np.random.Generator, objs: list[SceneObject], rels: list[tuple[int, str, int]]) -> str:
    parts = [
        f"{_describe(rng, objs[i])} {_pick(rng, POSITION_PHRASES[objs[i].position])}"
        for i in rng.permutation(len(objs))
    ]
    lead = _pick(rng, ["", "there is ", "an image with ", "a picture of ", f"{NUMBERS[len(objs)]} shapes: "])
    return lead + _join(parts)


def _cap_relation(rng: np.random.Generator, objs: list[SceneObject], rels: list[tuple[int, str, int]]) -> str:
    i, rel, j = rels[int(rng.integers(len(rels)))]
    phrase = _pick(rng, RELATION_PHRASES[rel])
    a, b = _describe(rng, objs[i]), _describe(rng, objs[j])
    if rng.random() < 0.5:
        return f"{a} {phrase} {b}"
    a, b = _describe(rng, objs[i], article=False), _describe(rng, objs[j], article=False)
    return f"the {a} is {phrase} the {b}"


def _cap_two_relations(
    rng: np.random.Generator, objs: list[SceneObject], rels: list[tuple[int, str, int]]
) -> str:
    first = rels[int(rng.integers(len(rels)))]
    follow = [r for r in rels if r[0] == first[2] and r[2] != first[0]]
    if not follow:
        return _cap_relation(rng, objs, rels)
    second = follow[int(rng.integers(len(follow)))]
    a, b, c = (_describe(rng, objs[k]) for k in (first[0], first[2], second[2]))
    p1, p2 = _pick(rng, RELATION_PHRASES[first[1]]), _pick(rng, RELATION_PHRASES[second[1]])
    return f"{a} {p1} {b}, which is {p2} {c}"


def _cap_colours(rng: np.random.Generator, objs: list[SceneObject], rels: list[tuple[int, str, int]]) -> str:
    colours = list(dict.fromkeys(objs[i].colour for i in rng.permutation(len(objs))))
    words = [_pick(rng, COLOUR_WORDS[c]) for c in colours]
    template = _pick(rng, ["{} shapes", "an image with {} objects", "something {}", "{} things"])
    if template == "something {}":
        return _join([f"something {w}" for w in words])
    return template.format(_join(words))


def _cap_shapes(rng: np.random.Generator, objs: list[SceneObject], rels: list[tuple[int, str, int]]) -> str:
    counts: dict[str, int] = {}
    for i in rng.permutation(len(objs)):
        counts[objs[i].shape] = counts.get(objs[i].shape, 0) + 1
    parts = []
    for shape, n in counts.items():
        word = _pick(rng, SHAPE_WORDS[shape])
        parts.append(f"{_article(word)} {word}" if n == 1 else f"{NUMBERS[n]} {PLURALS[word]}")
    lead = _pick(rng, ["", "shapes: ", f"{NUMBERS[len(objs)]} shapes: ", "a picture with "])
    return lead + _join(parts)


def _cap_single(rng: np.random.Generator, objs: list[SceneObject], rels: list[tuple[int, str, int]]) -> str:
    o = objs[int(rng.integers(len(objs)))]
    desc, pos = _describe(rng, o, size_p=0.5), _pick(rng, POSITION_PHRASES[o.position])
    return f"{pos} there is {desc}" if rng.random() < 0.4 else f"{desc} {pos}"


def _cap_objects(rng: np.random.Generator, objs: list[SceneObject], rels: list[tuple[int, str, int]]) -> str:
    return _join([_describe(rng, objs[i], size_p=0.3) for i in rng.permutation(len(objs))])


def _cap_pair(rng: np.random.Generator, objs: list[SceneObject], rels: list[tuple[int, str, int]]) -> str:
    i, j = (int(k) for k in rng.choice(len(objs), size=2, replace=False))
    parts = [f"{_describe(rng, objs[k])} {_pick(rng, POSITION_PHRASES[objs[k].position])}" for k in (i, j)]
    return " and ".join(parts)


CaptionFn = Callable[[np.random.Generator, list[SceneObject], list[tuple[int, str, int]]], str]
# (name, function, weight): "full" always comes first in the draw so every image has one caption
# that pins it down; the rest are partial, as people's queries are.
CAPTION_KINDS: tuple[tuple[str, CaptionFn, float], ...] = (
    ("relation", _cap_relation, 3.0),
    ("two_relations", _cap_two_relations, 1.0),
    ("single", _cap_single, 2.0),
    ("pair", _cap_pair, 1.5),
    ("objects", _cap_objects, 1.5),
    ("colours", _cap_colours, 1.0),
    ("shapes", _cap_shapes, 1.0),
)


def make_captions(rng: np.random.Generator, objects: list[SceneObject], n: int = 5) -> list[str]:
    """``n`` distinct captions: one full description and ``n - 1`` partial ones, shuffled."""
    rels = relations_of(objects)
    names = [k[0] for k in CAPTION_KINDS]
    weights = np.array([k[2] for k in CAPTION_KINDS])
    captions = [_cap_full(rng, objects, rels)]
    for _ in range(50 * n):
        if len(captions) == n:
            break
        k = int(rng.choice(len(names), p=weights / weights.sum()))
        text = CAPTION_KINDS[k][1](rng, objects, rels)
        if text not in captions:
            captions.append(text)
    while len(captions) < n:  # tiny scenes can run out of distinct phrasings: vary the full one
        captions.append(_cap_full(rng, objects, rels) + f" ({len(captions)})")
    order = rng.permutation(n)
    return [_style(rng, captions[i]) for i in order]


def _style(rng: np.random.Generator, text: str) -> str:
    if rng.random() < 0.5:
        text = text[0].upper() + text[1:]
    if rng.random() < 0.4:
        text += "."
    return text


# ----------------------------------------------------------------------------- rendering


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


def _background(rng: np.random.Generator, size: int) -> tuple[np.ndarray, str, list[int]]:
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
    img, texture, bg = _background(rng, size)
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


# ----------------------------------------------------------------------------- data set


def _split_records(out_dir: Path, split: str, n: int, image_size: int, seed: int) -> list[ManifestRecord]:
    split_index = SPLITS.index(split)
    img_dir = out_dir / "images" / split
    img_dir.mkdir(parents=True, exist_ok=True)
    records: list[ManifestRecord] = []
    group_index = 0
    while len(records) < n:
        grng = np.random.default_rng([seed, split_index, group_index])
        members = _group(grng)
        group_id = f"{split}-g{group_index:05d}"
        base_id = f"{split}-{len(records):05d}"
        for member_index, (kind, objects) in enumerate(members):
            if len(records) == n:
                break
            irng = np.random.default_rng([seed, split_index, group_index, member_index + 1])
            image_id = f"{split}-{len(records):05d}"
            image, background, placed = render_scene(irng, objects, image_size)
            fmt = "png" if irng.random() < 0.5 else "jpg"
            path = img_dir / f"{image_id}.{fmt}"
            if fmt == "png":
                image.save(path, format="PNG")
            else:
                image.save(path, format="JPEG", quality=90)
            captions = make_captions(irng, objects)
            metadata = {
                "split": split,
                "group": group_id,
                "variant": kind,
                "variant_of": None if kind == "base" else base_id,
                "format": fmt,
                "size": image_size,
                "background": background,
                "objects": [
                    {"shape": o.shape, "colour": o.colour, "size": o.size, "position": o.position, **p}
                    for o, p in zip(objects, placed, strict=True)
                ],
                "relations": [
                    {"subject": i, "relation": rel, "object": j} for i, rel, j in relations_of(objects)
                ],
            }
            records.append(ManifestRecord(id=image_id, image=path, captions=captions, metadata=metadata))
        group_index += 1
    return records


def generate_scenes(
    out_dir: str | Path,
    *,
    n_train: int = 2000,
    n_val: int = 200,
    n_test: int = 500,
    image_size: int = 96,
    seed: int = 0,
) -> dict[str, Path]:
    """Write images under ``out_dir/images/`` and ``out_dir/{train,val,test}.jsonl``.

    Returns split -> manifest path. Same arguments, same bytes. Images from an earlier, larger
    run in the same folder are not deleted, but manifests list only this run's images.
    """
    counts = {"train": n_train, "val": n_val, "test": n_test}
    for split, n in counts.items():
        if not isinstance(n, int) or n < 0:
            raise ValueError(f"n_{split} must be a non-negative integer, got {n!r}")
    if not isinstance(image_size, int) or not 32 <= image_size <= 1024:
        raise ValueError(f"image_size must be an integer in [32, 1024], got {image_size!r}")
    if not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    manifests: dict[str, Path] = {}
    for split, n in counts.items():
        records = _split_records(out, split, n, image_size, seed)
        manifests[split] = write_manifest(out / f"{split}.jsonl", records)
        log.info("scenes: %s: %d images -> %s", split, len(records), manifests[split])
    return manifests
