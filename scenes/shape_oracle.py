"""Read a scene caption back into constraints, and score images symbolically from their metadata.

Two jobs: (1) check that every generated caption is true of its own image, and (2) show that the
benchmark is hard in the intended ways: a matcher that sees only shapes ties with all the
hard negatives, while one that also uses colours, positions and relations separates them. No
neural network is involved; this is the "upper bound from reading the metadata" baseline.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vsparta.scenes.shape_captions import (
    COLOUR_WORDS,
    NUMBERS,
    PLURALS,
    POSITION_PHRASES,
    RELATION_PHRASES,
    SHAPE_WORDS,
    SIZE_WORDS,
)

ATTRIBUTES = ("shape", "colour", "size", "position", "relation")
_GENERIC_NOUNS = {"shape", "shapes", "object", "objects", "thing", "things", "something"}

_SHAPE = {w: s for s, ws in SHAPE_WORDS.items() for w in ws}
_PLURAL = {PLURALS[w]: s for s, ws in SHAPE_WORDS.items() for w in ws}
_COLOUR = {w: c for c, ws in COLOUR_WORDS.items() for w in ws}
_SIZE = {w: z for z, ws in SIZE_WORDS.items() for w in ws}
_NUMBER = {w: n for n, w in NUMBERS.items()}
# multi-word phrases, longest first so "on the left of" (relation) beats "on the left" (position)
_PHRASES: list[tuple[tuple[str, ...], str, str]] = sorted(
    [(tuple(p.split()), "relation", r) for r, ps in RELATION_PHRASES.items() for p in ps]
    + [(tuple(p.split()), "position", q) for q, ps in POSITION_PHRASES.items() for p in ps],
    key=lambda item: -len(item[0]),
)


@dataclass
class Mention:
    shape: str
    colour: str | None = None
    size: str | None = None
    position: str | None = None
    count: int = 1


@dataclass
class ParsedCaption:
    mentions: list[Mention] = field(default_factory=list)
    relations: list[tuple[int, str, int]] = field(default_factory=list)
    colours: list[str] = field(default_factory=list)  # colours named without a shape


def parse_caption(text: str) -> ParsedCaption:
    """Turn a caption written by :mod:`vsparta.scenes.shapes` back into mentions and relations."""
    tokens = re.findall(r"[a-z]+", text.lower())
    items: list[tuple[str, Any]] = []
    modifiers: list[str] = []
    i = 0
    while i < len(tokens):
        for phrase, kind, value in _PHRASES:
            if tuple(tokens[i : i + len(phrase)]) == phrase:
                items.extend(("colour", _COLOUR[m]) for m in modifiers if m in _COLOUR)
                modifiers = []
                items.append((kind, value))
                i += len(phrase)
                break
        else:
            tok = tokens[i]
            i += 1
            if tok in _SHAPE or tok in _PLURAL:
                m = Mention(shape=_SHAPE.get(tok) or _PLURAL[tok])
                for mod in modifiers:
                    if mod in _COLOUR:
                        m.colour = _COLOUR[mod]
                    elif mod in _SIZE:
                        m.size = _SIZE[mod]
                    elif mod in _NUMBER:
                        m.count = _NUMBER[mod]
                items.append(("mention", m))
                modifiers = []
            elif tok in _COLOUR or tok in _SIZE or tok in _NUMBER:
                modifiers.append(tok)
            else:  # "and", "a", "shapes", "there", ... end a modifier run
                items.extend(("colour", _COLOUR[m]) for m in modifiers if m in _COLOUR)
                modifiers = []
    items.extend(("colour", _COLOUR[m]) for m in modifiers if m in _COLOUR)

    parsed = ParsedCaption()
    index_of: dict[int, int] = {}  # item position -> mention index
    for pos, (kind, value) in enumerate(items):
        if kind == "mention":
            index_of[pos] = len(parsed.mentions)
            parsed.mentions.append(value)
        elif kind == "colour":
            parsed.colours.append(value)
    for pos, (kind, value) in enumerate(items):
        if kind == "position":
            # "a red circle on the left": the mention before; "on the left there is ...": after
            target = pos - 1 if pos - 1 in index_of else next((p for p in range(pos + 1, len(items))
                                                               if p in index_of), None)  # fmt: skip
            if target is not None:
                parsed.mentions[index_of[target]].position = value
        elif kind == "relation":
            before = [p for p in index_of if p < pos]
            after = [p for p in index_of if p > pos]
            if before and after:
                parsed.relations.append((index_of[max(before)], value, index_of[min(after)]))
    return parsed


class SceneIndex:
    """Per-image facts from manifest metadata, in the form the matchers need."""

    def __init__(self, metadata: Mapping[str, Any]) -> None:
        self.objects: list[dict[str, str]] = [
            {k: o[k] for k in ("shape", "colour", "size", "position")} for o in metadata["objects"]
        ]
        self.relations = {(r["subject"], r["relation"], r["object"]) for r in metadata["relations"]}
        self.colours = {o["colour"] for o in self.objects}

    def candidates(self, m: Mention, use: frozenset[str]) -> list[int]:
        out = []
        for k, o in enumerate(self.objects):
            if o["shape"] != m.shape:
                continue
            if "colour" in use and m.colour and o["colour"] != m.colour:
                continue
            if "size" in use and m.size and o["size"] != m.size:
                continue
            if "position" in use and m.position and o["position"] != m.position:
                continue
            out.append(k)
        return out

    def check(self, parsed: ParsedCaption, use: Iterable[str] = ATTRIBUTES) -> tuple[int, int]:
        """(constraints satisfied, constraints in the caption) using only the attributes in ``use``."""
        use = frozenset(use)
        unknown = use - set(ATTRIBUTES)
        if unknown:
            raise ValueError(f"unknown attributes {sorted(unknown)}; choose from {ATTRIBUTES}")
        ok = total = 0
        cands = [self.candidates(m, use) for m in parsed.mentions]
        for m, c in zip(parsed.mentions, cands, strict=True):
            total += 1
            ok += len(c) >= m.count
        if "colour" in use:
            for colour in parsed.colours:
                total += 1
                ok += colour in self.colours
        if "relation" in use:
            for i, rel, j in parsed.relations:
                total += 1
                ok += any((a, rel, b) in self.relations for a in cands[i] for b in cands[j] if a != b)
        return ok, total


def oracle_scores(
    captions: Sequence[str], metadata: Sequence[Mapping[str, Any]], use: Iterable[str]
) -> np.ndarray:
    """Scores [Q, I]: how many of each caption's constraints (restricted to ``use``) each image meets."""
    use = frozenset(use)
    parsed = [parse_caption(c) for c in captions]
    images = [SceneIndex(m) for m in metadata]
    out = np.zeros((len(parsed), len(images)), dtype=np.float64)
    for qi, p in enumerate(parsed):
        for ii, img in enumerate(images):
            out[qi, ii] = img.check(p, use)[0]
    return out
