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
weight, one it writes weakly everywhere by many at a low one. The chance of proving a word the
index lacks at any of the k weights stays under ``alpha``: each is asked with ``alpha / k``
(Bonferroni), or, ``joint``, with the largest share whose exact joint chance stays under ``alpha``
(``joint_counts``: the counts at nested weights move together, so Bonferroni's true chance is
about a third of ``alpha``, and each weight can ask for an image or two fewer).
Measured on half of the whole catalog (docs/no-match.md, "A scan of strong weights, and relation
words"): 55 % -> 68 % of the index's own words proven on 2,500 images, none more of the absent
ones. For an index of ``n`` images the chance count is ``null_rate x n``; the word is **beyond
chance** when so many images hold it strongly that a count with that mean reaches it with
probability under ``alpha`` (Poisson, the rate taken as exact; or, ``predictive``, negative binomial,
as uncertain as a rate counted on the calibration's ``negatives`` images is: ``Presence.spread``),
and at least ``ratio`` times that mean: with hundreds expected (a
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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from vsparta.termindex import Hit
from vsparta.termindex.elastic.text import round_like_elasticsearch

SMOOTHING = 0.5  # added to the calibration's count of strong negatives: a rate of 0 is never proven
MAX_DEPTH = 10_000  # a word so common by chance that more results would be needed is never proven
JOINT_DEPTH = 1_000  # counts above this join the joint chance by the union bound (a cap on its cost)
BISECTIONS = 10  # steps of the search for the joint test's share of alpha per weight


@dataclass(frozen=True)
class Presence:
    """A calibrated word's strong weight (of its key piece) and how often other images reach it;
    ``more``: other strong weights and their null rates, tried too (the module's scan);
    ``negatives``: how many calibration images the rates were counted on (0: not known, as in files
    calibrated before 2026-12-05; the rates are then taken as exact, ``spread``)."""

    weight: float
    null_rate: float
    more: tuple[tuple[float, float], ...] = ()
    negatives: int = 0

    @property
    def levels(self) -> tuple[tuple[float, float], ...]:
        """Every (strong weight, null rate) the test tries, the main one first."""
        return ((self.weight, self.null_rate), *self.more)

    def spread(self, indexed: int) -> float:
        """How much wider than Poisson an index of ``indexed`` images' chance count is when the rates
        are known from ``negatives`` calibration images only: ``indexed / (negatives + 1)``.

        Why: a rate counted on m images is itself uncertain; with the smoothed count's Gamma
        posterior the index's count is negative binomial, its variance the mean x (1 + spread). An
        index larger than its calibration (2,500 images against 2,000) is where a word's few
        strong negatives say least (docs/no-match.md, "A calibration's own chance")."""
        return indexed / (self.negatives + 1) if self.negatives > 0 else 0.0


def null_rate(strong_negatives: int, negatives: int) -> float:
    """The share of calibration images without the word that hold it strongly, smoothed."""
    return (strong_negatives + SMOOTHING) / (negatives + 1)


def needed_count(expected: float, alpha: float, ratio: float = 1.0, spread: float = 0.0) -> int:
    """The least count ``c`` with P(X >= c) < ``alpha`` for X the chance count (``_pmf``: Poisson
    with mean ``expected``, or negative binomial with that mean and ``spread``), and at least
    ``ratio`` x ``expected``."""
    if expected <= 0:
        return 1
    if ratio * expected > MAX_DEPTH:
        return MAX_DEPTH + 1
    return _first_under(_tails(expected, spread), expected, alpha, ratio)


def _first_under(tails: np.ndarray, expected: float, alpha: float, ratio: float) -> int:
    """``needed_count`` from the chance count's tails (one array for every alpha tried)."""
    under = int(np.searchsorted(-tails, -alpha, side="right"))  # tails fall: the first below alpha
    if under > MAX_DEPTH:
        return MAX_DEPTH + 1
    return max(under, math.ceil(ratio * expected))


def scan_counts(
    expected: Sequence[float], alpha: float, ratio: float = 1.0, joint: bool = False, spread: float = 0.0
) -> tuple[int, ...]:
    """Per strong weight (``expected``: its chance count, in the scan's order), the least count that
    proves the word there, so that a word the index lacks is proven at any of them with a chance
    under ``alpha``: Bonferroni (``alpha / k`` each), or ``joint`` (``joint_counts``)."""
    if joint and len(expected) > 1:
        return joint_counts(tuple(expected), alpha, ratio, spread)
    return tuple(needed_count(e, alpha / len(expected), ratio, spread) for e in expected)


@lru_cache(maxsize=65_536)
def joint_counts(
    expected: tuple[float, ...], alpha: float, ratio: float, spread: float = 0.0
) -> tuple[int, ...]:
    """The counts of the largest common share of ``alpha`` per weight (between ``alpha / k`` and
    ``alpha``) whose exact chance of any count reaching its own stays under ``alpha``
    (``family_chance``). Remembered: an index of one size asks the same words again."""
    tails = [_tails(e, spread) if 0 < e and ratio * e <= MAX_DEPTH else None for e in expected]

    def counts_at(share: float) -> tuple[int, ...]:
        return tuple(
            needed_count(e, share, ratio) if t is None else _first_under(t, e, share, ratio)
            for e, t in zip(expected, tails, strict=True)
        )

    low, high = alpha / len(expected), alpha
    best = counts_at(low)
    for _ in range(BISECTIONS):
        share = math.sqrt(low * high)
        counts = counts_at(share)
        if counts == best or family_chance(expected, counts, spread) <= alpha:
            low, best = share, counts
        else:
            high = share
    return best


def family_chance(expected: Sequence[float], counts: Sequence[int], spread: float = 0.0) -> float:
    """The chance that, in an index without the word, the images holding it at some strong weight
    reach that weight's count: an upper bound, exact up to ``JOINT_DEPTH``.

    Why exact is possible: the weights are nested (an image at a higher one is at every lower
    one), so the counts are a sum of independent increments from the highest weight (smallest
    chance count) down (Poisson; or negative binomial of one ``spread``, whose sums are too: the
    increments' rates have independent Gamma posteriors), and one pass of convolutions, cut at each
    count, gives the chance that none reaches its own. Counts above ``JOINT_DEPTH`` (or
    ``MAX_DEPTH``: never asked) are added by the union bound."""
    levels = sorted(zip(expected, counts, strict=True), key=lambda ec: -ec[0])  # highest weight last
    inner = [(e, c) for e, c in levels if c <= JOINT_DEPTH]
    outer = sum(_tail(e, spread, c) for e, c in levels if JOINT_DEPTH < c <= MAX_DEPTH)
    if not inner:
        return min(1.0, outer)
    size = max(c for _, c in inner)
    none_reached = np.zeros(size)
    none_reached[0] = 1.0
    below = 0.0  # the chance count of the weight above (none above the highest)
    for e, c in reversed(inner):  # highest weight first
        step = _pmf(max(e - below, 0.0), spread, size)
        none_reached = np.convolve(none_reached, step)[:size]
        none_reached[c:] = 0.0
        below = max(below, e)
    return min(1.0, 1.0 - float(none_reached.sum()) + outer)


def _pmf(mean: float, spread: float, size: int) -> np.ndarray:
    """P(X = 0 .. size - 1) for X ~ Poisson(``mean``), or, ``spread`` > 0, negative binomial with
    that mean and variance mean x (1 + spread) (shape mean / spread), from logs (no underflow)."""
    x = np.arange(size)
    if mean <= 0:
        return (x == 0).astype(float)
    if spread <= 0:
        logs = x * math.log(mean) - mean - np.concatenate(([0.0], np.cumsum(np.log(x[1:]))))
    else:
        shape, grow = mean / spread, math.log(spread / (1 + spread))
        steps = np.log(shape + x[:-1]) - np.log(x[1:]) + grow  # log P(k + 1) - log P(k)
        logs = -shape * math.log1p(spread) + np.concatenate(([0.0], np.cumsum(steps)))
    return np.exp(logs)


def _tails(mean: float, spread: float) -> np.ndarray:
    """P(X >= c) for c = 0, 1, ... until the rest is below any alpha asked (``_pmf``), each summed
    upward from c (no cancellation: the tails asked are small); c past its end: 0."""
    size = int(mean + 40 * math.sqrt(mean * (1 + spread)) + 100 * (1 + spread))
    return np.cumsum(_pmf(mean, spread, size)[::-1])[::-1]


def _tail(mean: float, spread: float, count: int) -> float:
    tails = _tails(mean, spread)
    return float(tails[count]) if count < len(tails) else 0.0


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
    engine: Any,
    words: Mapping[str, tuple[int, Presence]],
    indexed: int,
    alpha: float,
    ratio: float = 1.0,
    joint: bool = False,
    predictive: bool = False,
) -> dict[str, Verdict]:
    """Per word (its key and ``Presence``), the test on an index of ``indexed`` images: one search of
    the key alone for the most results any of its strong weights needs (``scan_counts``, Bonferroni
    or ``joint``; ``engine``: an ``AsyncReader``), beyond chance at the first weight that holds;
    ``predictive``: the chance count as uncertain as its calibration's size says (``Presence.spread``).
    A query's words are asked together, so its latency is one search's, not one per word."""

    async def one(key: int, presence: Presence) -> Verdict:
        expected = [rate * indexed for _, rate in presence.levels]
        spread = presence.spread(indexed) if predictive else 0.0
        needed = scan_counts(expected, alpha, ratio, joint, spread)  # a word the index lacks passes none
        tried = list(zip((w for w, _ in presence.levels), expected, needed, strict=True))
        depth = max((c for _, _, c in tried if c <= min(indexed, MAX_DEPTH)), default=0)
        hits = await engine.search({key: 1.0}, k=depth, explain=True) if depth else []
        for weight, expected, needed in tried:
            if needed <= depth and beyond_chance(hits, key, weight, needed):
                return Verdict(True, needed, expected)
        _, expected, needed = tried[0]  # the main weight's, for the answer's words
        return Verdict(False, needed, expected)

    found = await asyncio.gather(*(one(key, presence) for key, presence in words.values()))
    return dict(zip(words, found, strict=True))
