"""Captions of a scene: one full description and partial ones, in varied but truthful words.

Every word maps back to one value (the canonical word first), so ``vsparta.scenes.shape_oracle`` can read
a caption back and check it against the scene's metadata.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from vsparta.scenes.shape_objects import SceneObject, relations_of

# Words used in captions. The canonical word comes first; every word maps back to one value, so
# captions can be checked against the metadata (tests, and the symbolic matchers in shape_oracle).
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
