"""The scenes' world: shapes, colours, sizes, positions, the objects placed in a scene, the relations
that hold between them, and the groups of a base scene with its hard-negative variants.

Captions (``vsparta.scenes.shape_captions``) and pixels (``vsparta.scenes.shape_render``) are both drawn from
these objects; neither knows about the other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

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


@dataclass(frozen=True)
class SceneObject:
    shape: str
    colour: str
    size: str
    position: str

    def key(self) -> tuple[str, str, str, str]:
        return (self.shape, self.colour, self.size, self.position)


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


def scene_group(rng: np.random.Generator) -> list[tuple[str, list[SceneObject]]]:
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
