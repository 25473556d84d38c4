"""Words of the object scenes: plurals and articles, and which objects and words are held out.

The held-out choices are what make the two generalisation tests honest:

- *held-out objects*: a fixed share of the catalog never appears in train/val/test scenes;
- *held-out words*: whole words (aliases and category words) that no train/val/test caption uses,
  while the objects they name do appear in training under their other names ("automobile" in
  training, "car" in the query). A word is held out only if every object keeps at least one name
  and one category word without it, so the rest of the benchmark can still caption every object.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from vsparta.scenes.emoji_catalog import EmojiObject

NUMBER_WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}
_UNCHANGED = ("sheep", "fish", "deer", "glasses", "scissors", "pants", "shorts", "jeans", "clothing", "food")
_IRREGULAR = {"mouse": "mice", "person": "people", "man": "men", "woman": "women", "child": "children"}
_IRREGULAR |= {"foot": "feet", "tooth": "teeth", "goose": "geese", "knife": "knives", "leaf": "leaves"}


def plural(phrase: str) -> str:
    """English plural of a noun phrase's last word (a rule, not a dictionary: good enough for captions)."""
    head, _, last = phrase.rpartition(" ")
    if last in _IRREGULAR:
        last = _IRREGULAR[last]
    elif last.endswith(_UNCHANGED) or not last.isalpha():
        pass
    elif re.search(r"(s|x|z|ch|sh)$", last):
        last += "es"
    elif re.search(r"[^aeiou]y$", last):
        last = last[:-1] + "ies"
    else:
        last += "s"
    return f"{head} {last}".strip()


def article(phrase: str) -> str:
    return "an" if phrase[:1] in "aeiou" else "a"


def counted(phrase: str, count: int) -> str:
    """'a dog' / 'two dogs'."""
    return f"{article(phrase)} {phrase}" if count == 1 else f"{NUMBER_WORDS[count]} {plural(phrase)}"


@dataclass(frozen=True)
class Vocabulary:
    """Which objects the seen splits use and which words their captions avoid."""

    seen: tuple[int, ...]  # catalog indices of objects in train/val/test
    unseen: tuple[int, ...]  # held-out objects
    held_words: frozenset[str]

    @property
    def held_forms(self) -> frozenset[str]:
        """The held-out words as a caption may write them (a count makes "fruit" "fruits")."""
        return self.held_words | {plural(w) for w in self.held_words}

    def allowed(self, phrase: str) -> bool:
        return not (set(phrase.split()) & self.held_words)

    def names(self, obj: EmojiObject, held: bool = False) -> list[str]:
        """Names of obj without a held-out word, or (held=True) only those with one; never a name
        with a count word in it ("four thirty"), which a caption's count would make ambiguous."""
        return [p for p in obj.phrases if self.allowed(p) != held and not _counts_in(p)]

    def categories(self, obj: EmojiObject, held: bool = False) -> list[str]:
        return [c for c in obj.categories if self.allowed(c) != held]


def _counts_in(phrase: str) -> bool:
    return bool(set(phrase.split()) & set(NUMBER_WORDS.values()))


def _words(phrases: Iterable[str]) -> set[str]:
    return {w for p in phrases for w in p.split()}


def choose_vocabulary(
    objects: Sequence[EmojiObject],
    seed: int,
    reserved: Iterable[str] = (),
    unseen_share: float = 0.08,
    held_share: float = 0.12,
) -> Vocabulary:
    """Draw the held-out objects and words (same seed, same choice). ``reserved``: the captions' own
    words (numbers, sizes, templates), which every split uses and so can never be held out."""
    rng = np.random.default_rng([seed, 7919])
    usable = [i for i, o in enumerate(objects) if any(not _counts_in(p) for p in o.phrases)]
    order = [usable[int(k)] for k in rng.permutation(len(usable))]
    n_unseen = round(unseen_share * len(usable))
    unseen = tuple(sorted(int(i) for i in order[:n_unseen]))
    seen = tuple(sorted(int(i) for i in order[n_unseen:]))
    held: set[str] = set()
    candidates = sorted(
        _words(p for i in seen for p in objects[i].aliases)
        | _words(c for i in seen for c in objects[i].categories)
    )
    # never a caption word in every split, nor the plural a count makes of another name ("beers")
    plurals = {plural(w) for w in _words(p for o in objects for p in (*o.phrases, *o.categories))}
    candidates = [w for w in candidates if w not in set(reserved) | set(NUMBER_WORDS.values()) | plurals]
    target = round(held_share * len(candidates))
    for word in rng.permutation(candidates):
        if len(held) >= target:
            break
        trial = held | {str(word)}
        if all(_still_named(objects[i], trial) for i in seen):
            held = trial
    return Vocabulary(seen=seen, unseen=unseen, held_words=frozenset(held))


def _still_named(obj: EmojiObject, held: set[str]) -> bool:
    return any(not (set(p.split()) & held) and not _counts_in(p) for p in obj.phrases) and any(
        c not in held for c in obj.categories
    )
