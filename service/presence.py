"""Does the index hold a word beyond chance? A test from the index's own counts.

Why: a model writes a word it learnt onto look-alikes with weights as large as on the real thing
("bird" on a hippopotamus, "mammal" on a parrot), so no floor on one image's weight tells a query
for an object the index lacks from one it holds (docs/no-match.md: at most 48 % of such queries
answered "no match" with a floor per word). But the calibration images also say how often the model
writes a word strongly on pictures of *other* things: if the index holds no more images with a
strong weight of it than that rate predicts for an index of its size, its strong images are
look-alikes, and the word matches no image of this index.

Per calibrated word (``Presence``, made by ``vsparta calibrate``): ``weight``, a strong weight of
its key piece (a quantile of its weights on the images whose captions use it), and ``null_rate``,
the share of the other calibration images holding the key at that weight or more; ``more``: other
strong weights (other quantiles) and their null rates, tried too (a **scan**). A word the model
writes on its own images far above its look-alikes is then proven by a few images at a high
weight, one it writes weakly everywhere by many at a low one; each of the k weights is asked with
``alpha / k`` (Bonferroni), so the chance of proving a word the index lacks stays under ``alpha``.
Measured on half of the whole catalog (docs/no-match.md, "A scan of strong weights, and relation
words"): 55 % -> 68 % of the index's own words proven on 2,500 images, none more of the absent
ones. For an index of ``n`` images the chance count is ``null_rate x n``; the word is **beyond
chance** when so many images hold it strongly that a Poisson count with that mean reaches it with
probability under ``alpha``, and at least ``ratio`` times that mean: with hundreds expected (a
caption template's "photo", written as weakly on every image), a few more than the calibration
predicts is a difference between two sets of pictures, not evidence that the index shows the word.
The least such count ``c`` (``needed_count``) is all a search needs to ask: the word's key alone
as the query, ``c`` results; beyond chance when the ``c``-th still holds the strong weight.
One search of a few results per calibrated query word (the most any of its weights needs), on any
engine (no new statistics).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vsparta.termindex import Hit
from vsparta.termindex.elastic.text import round_like_elasticsearch

SMOOTHING = 0.5  # added to the calibration's count of strong negatives: a rate of 0 is never proven
MAX_DEPTH = 10_000  # a word so common by chance that more results would be needed is never proven


@dataclass(frozen=True)
class Presence:
    """A calibrated word's strong weight (of its key piece) and how often other images reach it;
    ``more``: other strong weights and their null rates, tried too (the module's scan)."""

    weight: float
    null_rate: float
    more: tuple[tuple[float, float], ...] = ()

    @property
    def levels(self) -> tuple[tuple[float, float], ...]:
        """Every (strong weight, null rate) the test tries, the main one first."""
        return ((self.weight, self.null_rate), *self.more)


def null_rate(strong_negatives: int, negatives: int) -> float:
    """The share of calibration images without the word that hold it strongly, smoothed."""
    return (strong_negatives + SMOOTHING) / (negatives + 1)


def needed_count(expected: float, alpha: float, ratio: float = 1.0) -> int:
    """The least count ``c`` with P(X >= c) < ``alpha`` for X ~ Poisson(``expected``), and at least
    ``ratio`` x ``expected``."""
    if expected <= 0:
        return 1
    if ratio * expected > MAX_DEPTH:
        return MAX_DEPTH + 1
    term = math.exp(-expected)  # P(X = 0)
    below = 0.0  # P(X < c)
    c = 0
    while c < MAX_DEPTH:
        below += term
        c += 1
        if 1.0 - below < alpha:
            return max(c, math.ceil(ratio * expected))
        term *= expected / c
    return MAX_DEPTH + 1


def beyond_chance(hits: list[Hit], key: int, weight: float, needed: int) -> bool:
    """Whether the results of the key alone (best first) show ``needed`` images holding ``weight``.

    Compared at the precision every engine keeps: Elasticsearch and OpenSearch store 9 significant
    bits, truncated, so images whose weights differ less tie there (and are ordered by id); the
    ``needed``-th of them may sit on either side of a finer threshold, and the embedded engine's
    half floats would answer otherwise (measured: 1.0010 and 1.0005 against 1.0008)."""
    if needed > len(hits):
        return False
    terms = hits[needed - 1].contributions or {}
    return key in terms and _shared(terms[key][0]) >= _shared(weight)


def _shared(weight: float) -> float:
    return float(round_like_elasticsearch(weight))


@dataclass(frozen=True)
class Verdict:
    """What the test said of one word: beyond chance or not, and the count it needed."""

    present: bool
    needed: int
    expected: float


async def verdicts(
    engine: Any, words: Mapping[str, tuple[int, Presence]], indexed: int, alpha: float, ratio: float = 1.0
) -> dict[str, Verdict]:
    """Per word (its key and ``Presence``), the test on an index of ``indexed`` images: one search of
    the key alone for the most results any of its strong weights needs (``needed_count``;
    ``engine``: an ``AsyncReader``), beyond chance at the first weight that holds; a query's words
    are asked together, so its latency is one search's, not one per word."""

    async def one(key: int, presence: Presence) -> Verdict:
        each = alpha / len(presence.levels)  # Bonferroni: a word the index lacks passes none
        tried = [
            (w, rate * indexed, needed_count(rate * indexed, each, ratio)) for w, rate in presence.levels
        ]
        depth = max((c for _, _, c in tried if c <= min(indexed, MAX_DEPTH)), default=0)
        hits = await engine.search({key: 1.0}, k=depth, explain=True) if depth else []
        for weight, expected, needed in tried:
            if needed <= depth and beyond_chance(hits, key, weight, needed):
                return Verdict(True, needed, expected)
        _, expected, needed = tried[0]  # the main weight's, for the answer's words
        return Verdict(False, needed, expected)

    found = await asyncio.gather(*(one(key, presence) for key, presence in words.values()))
    return dict(zip(words, found, strict=True))
