"""Five captions per object scene, from varied templates that mix names, aliases and category words.

A scene's *kinds* are its distinct objects with their counts ("two dogs and a pizza"). Each caption
names every kind it mentions either by one of its names (CLDR name or an alias) or by a category
word ("an animal next to some food"), with counts, sizes, cells, relations and the background, so
the caption vocabulary is long-tailed. In the held-out splits one *focus* kind is always mentioned
the way the split tests (a held-out word, or an object never seen in training). The shift split
says the same things through templates no other split uses (``SHIFT_TEMPLATES``). Each caption's
*mentions* (which objects it names, with their counts) go into the scene's metadata: the
ambiguity ceiling (``scenes/object_ceiling.py``) reads them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from vsparta.scenes.emoji_catalog import EmojiObject
from vsparta.scenes.object_render import Placed, relation
from vsparta.scenes.object_words import Vocabulary, article, counted

CAPTIONS_PER_IMAGE = 5
SIZE_WORDS = {"small": ("small", "little", "tiny"), "large": ("large", "big", "huge")}
TEXTURE_WORDS = {"stripes": "striped", "checks": "checkered", "blotches": "blotchy", "speckles": "speckled"}
_OPENERS = ("", "", "a photo of ", "a picture of ", "an image with ", "there is ", "i see ")
_LINKS = ("a", "an", "and", "in", "the", "on", "background", "there", "are", "some")
_RELATIONS = ("left of", "right of", "above", "below", "next to")
_POSITIONS = ("top", "bottom", "left", "right", "center", "middle")
# the shift split's sentence frames: none of them occurs in another split ({} = the objects)
# (no frame word names an object: "picture", "frame", "scene" and "look" do in the catalog)
SHIFT_TEMPLATES = (
    "{} can be seen here",
    "this snapshot shows {}",
    "a view containing {}",
    "visible here: {}",
    "somewhere in this image: {}",
)
SHIFT_RELATION = "{} placed {} {}"  # "a dog placed left of a pizza"


def template_words() -> frozenset[str]:
    """Every word a caption can contain besides the objects' names and categories."""
    phrases = [*_OPENERS, *_LINKS, *_RELATIONS, *_POSITIONS, *TEXTURE_WORDS.values()]
    phrases += [w for words in SIZE_WORDS.values() for w in words]
    return frozenset(w for p in phrases for w in p.split())


@dataclass(frozen=True)
class Kind:
    """One distinct object of a scene and where its copies are."""

    obj: EmojiObject
    placed: tuple[Placed, ...]
    focus: bool = False  # the held-out-words / held-out-objects subject of the scene

    @property
    def count(self) -> int:
        return len(self.placed)


def _phrase(rng: np.random.Generator, kind: Kind, vocab: Vocabulary, mode: str) -> str:
    """A name or category word for the kind, as the split allows or requires."""
    if kind.focus and mode == "heldout_words":
        options = vocab.names(kind.obj, held=True) + vocab.categories(kind.obj, held=True)
    elif kind.focus and mode == "heldout_objects":
        options = vocab.names(kind.obj) or list(kind.obj.phrases)
    elif rng.random() < 0.3:
        options = vocab.categories(kind.obj)
    else:
        options = vocab.names(kind.obj)
    options = options or vocab.names(kind.obj) or list(kind.obj.phrases)
    return str(options[int(rng.integers(len(options)))])


def _mention(rng: np.random.Generator, kind: Kind, vocab: Vocabulary, mode: str) -> str:
    phrase = _phrase(rng, kind, vocab, mode)
    if kind.count == 1 and rng.random() < 0.3:
        size_word = str(rng.choice(SIZE_WORDS[kind.placed[0].size]))
        return f"{article(size_word)} {size_word} {phrase}"
    return counted(phrase, kind.count)


def _join(parts: Sequence[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _subset(rng: np.random.Generator, kinds: Sequence[Kind]) -> list[Kind]:
    """All kinds, or a random non-empty subset that keeps the focus kind."""
    if len(kinds) == 1 or rng.random() < 0.5:
        return list(kinds)
    keep = [k for k in kinds if k.focus or rng.random() < 0.5]
    return keep or [kinds[int(rng.integers(len(kinds)))]]


Caption = tuple[str, list[Kind]]  # the text and the kinds it names


def _relation_caption(
    rng: np.random.Generator, kinds: Sequence[Kind], vocab: Vocabulary, mode: str, frame: str = "{} {} {}"
) -> Caption | None:
    singles = [k for k in kinds if k.count == 1]
    pairs = [
        (a, b) for a in singles for b in singles if a is not b and (a.focus or b.focus or mode == "seen")
    ]
    pairs = [(a, b, r) for a, b in pairs if (r := relation(a.placed[0], b.placed[0])) is not None]
    if not pairs:
        return None
    a, b, rel = pairs[int(rng.integers(len(pairs)))]
    return frame.format(_mention(rng, a, vocab, mode), rel, _mention(rng, b, vocab, mode)), [a, b]


def _caption(
    rng: np.random.Generator, kinds: Sequence[Kind], vocab: Vocabulary, mode: str, texture: str
) -> Caption:
    template = int(rng.integers(5))
    if template == 0:
        said = _relation_caption(rng, kinds, vocab, mode)
        if said is not None:
            return said
    chosen = _subset(rng, kinds)
    if template == 1 and len(chosen) == 1 and chosen[0].count == 1:
        return f"{_mention(rng, chosen[0], vocab, mode)} in the {chosen[0].placed[0].position()}", chosen
    listed = _join([_mention(rng, k, vocab, mode) for k in chosen])
    if template == 2:
        # (a shift background, drawn under seen frames by bench/shift_parts.py, is named as it is)
        return f"{listed} on a {TEXTURE_WORDS.get(texture, texture)} background", chosen
    opener = str(rng.choice(_OPENERS))
    if opener == "there is " and (len(chosen) > 1 or chosen[0].count > 1):
        opener = "there are "
    return opener + listed, chosen


def _shift_caption(rng: np.random.Generator, kinds: Sequence[Kind], vocab: Vocabulary) -> Caption:
    """The seen splits' names, counts and relations in the shift split's own frames."""
    template = int(rng.integers(len(SHIFT_TEMPLATES) + 1))
    if template == len(SHIFT_TEMPLATES):
        said = _relation_caption(rng, kinds, vocab, "seen", SHIFT_RELATION)
        if said is not None:
            return said
        template = int(rng.integers(len(SHIFT_TEMPLATES)))
    chosen = _subset(rng, kinds)
    listed = _join([_mention(rng, k, vocab, "seen") for k in chosen])
    return SHIFT_TEMPLATES[template].format(listed), chosen


def make_captions(
    rng: np.random.Generator, kinds: Sequence[Kind], vocab: Vocabulary, mode: str, texture: str
) -> tuple[list[str], list[list[dict[str, int | str]]]]:
    """Five distinct captions (fewer only if the scene cannot be said five ways) and, per caption,
    the objects it names with their counts. ``mode`` "shift": the seen words in the shift frames."""
    captions: list[str] = []
    mentions: list[list[dict[str, int | str]]] = []
    for _ in range(CAPTIONS_PER_IMAGE * 8):
        if mode == "shift":
            text, named = _shift_caption(rng, kinds, vocab)
        else:
            text, named = _caption(rng, kinds, vocab, mode, texture)
        if text not in captions:
            captions.append(text)
            mentions.append([{"name": k.obj.name, "count": k.count} for k in named])
        if len(captions) == CAPTIONS_PER_IMAGE:
            break
    return captions, mentions
