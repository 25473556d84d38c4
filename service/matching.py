"""Which results are matches, and what an answer says about each query word.

A bag-of-words index knows what a dense one cannot: how many images hold each word
(``AsyncReader.term_statistics``, the engine's own counts). So an answer can say "no image has
*dog*", and a result that only shares "a" with the query need not be shown as an answer to it.

The rule (its parameters chosen by measurement: ``bench/no_match.py``, docs/no-match.md):

- A query token is **common** when at least ``common_share`` of the indexed images hold it: "a" or
  "photo" in nearly every image tells them apart no better than nothing. It still adds to every
  score (explanations add up to the score), but never makes a result a match.
- A result **matches** when a token of one of the query's words (not punctuation) that is not
  common has a weight of at least ``min_weight`` in it: a learned model puts small weights on many
  words an image does not show.
- By default (``require_match``) results that do not match are left out, and an answer with none
  says why, per word ("No image has *dog*", "*a* is in every image and does not rank"). A request's
  ``min_score`` leaves out results scoring less.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vsparta.service.words import Word
from vsparta.termindex import Hit
from vsparta.termindex.base import TermStatistics

# Chosen on the object scenes (docs/no-match.md): see MatchRule.
COMMON_SHARE = 0.5
MIN_WEIGHT = 0.5


@dataclass(frozen=True)
class MatchRule:
    """``common_share``: a token held by at least this share of the images is common; ``min_weight``:
    the least weight of a token in an image for it to make that image a match."""

    common_share: float = COMMON_SHARE
    min_weight: float = MIN_WEIGHT

    def common(self, images: int, indexed: int) -> bool:
        return indexed > 0 and images >= self.common_share * indexed


@dataclass(frozen=True)
class WordCount:
    """One query word in the index: ``images`` hold it (its rarest piece's count: no more images can
    hold the whole word), ``common``: every piece is common, ``ids``: its pieces' vocabulary ids."""

    word: str
    tokens: tuple[str, ...]
    ids: tuple[int, ...]
    images: int
    common: bool


@dataclass(frozen=True)
class QueryCounts:
    """What the index holds of a query's words (from one ``TermStatistics``)."""

    indexed: int  # images in the index
    words: list[WordCount]
    informative: frozenset[int]  # ids of the words' pieces that are not common


def count_words(
    words: Sequence[Word], ids_of: Mapping[str, int], stats: TermStatistics, rule: MatchRule
) -> QueryCounts:
    """Per word, how many images hold it and whether it is common; which tokens can match."""
    out: list[WordCount] = []
    informative: set[int] = set()
    for word in words:
        ids = tuple(ids_of[t] for t in word.tokens if t in ids_of)
        if not ids:
            continue
        held = [int(stats.df.get(t, 0)) for t in ids]
        common = [rule.common(h, stats.n_docs) for h in held]
        informative.update(t for t, c in zip(ids, common, strict=True) if not c)
        out.append(WordCount(word.text, word.tokens, ids, min(held), all(common)))
    return QueryCounts(int(stats.n_docs), out, frozenset(informative))


def matched(hit: Hit, counts: QueryCounts, rule: MatchRule) -> set[int]:
    """The informative tokens ``hit`` holds with at least ``rule.min_weight``."""
    return {
        t
        for t, (weight, _) in (hit.contributions or {}).items()
        if t in counts.informative and weight >= rule.min_weight
    }


def select(
    hits: Sequence[Hit], counts: QueryCounts, rule: MatchRule, *, require_match: bool, min_score: float
) -> list[Hit]:
    """The hits to present: those scoring ``min_score`` or more and, with ``require_match``, matching."""
    return [h for h in hits if h.score >= min_score and (not require_match or matched(h, counts, rule))]


def _share(images: int, indexed: int) -> str:
    return "every image" if images >= indexed else f"{images:,} of the {indexed:,} images"


def describe(
    ranked: Sequence[Hit],
    selected: Sequence[Hit],
    shown: Sequence[Hit],
    counts: QueryCounts,
    rule: MatchRule,
    *,
    require_match: bool,
    min_score: float,
) -> dict[str, Any]:
    """The response's account of the words (``query_word_stats``), and ``no_match`` when nothing
    is shown: the informative words that found nothing, the common ones, and why, in words.
    ``ranked``: what the engine answered; ``selected``: what ``select`` kept of it; ``shown``: what
    is presented (re-ranked, at most k)."""
    stats = [
        {
            "word": w.word,
            "tokens": list(w.tokens),
            "images": w.images,
            "common": w.common,
            "results": sum(1 for h in shown if matched(h, counts, rule) & set(w.ids)),
        }
        for w in counts.words
    ]
    out: dict[str, Any] = {
        "indexed_images": counts.indexed,
        "query_word_stats": stats,
        "left_out": len(ranked) - len(selected),
    }
    if shown:
        return out
    common = [w for w in counts.words if w.common]
    rare = [w for w in counts.words if not w.common]
    reasons = [f"No image has {w.word}." for w in rare if w.images == 0]
    found = set().union(*(matched(h, counts, rule) for h in ranked))
    weak = [w for w in rare if w.images > 0 and not found & set(w.ids)]
    if weak and require_match:
        names = ", ".join(w.word for w in weak)
        reasons.append(
            f"The images that hold {names} hold {'it' if len(weak) == 1 else 'them'} too weakly to "
            f"count as a match (a weight of {rule.min_weight:g} or more)."
        )
    reasons += [f"{w.word} is in {_share(w.images, counts.indexed)} and does not rank." for w in common]
    if not counts.words:
        reasons.append("No word of the query is in the model's vocabulary.")
    elif not rare and require_match:
        reasons.append("No other word tells the images apart.")
    if min_score > 0 and select(ranked, counts, rule, require_match=require_match, min_score=0.0):
        reasons.append(f"No result scores {min_score:g} or more.")
    out["no_match"] = {
        "reason": " ".join(reasons) or "No image matches the query.",
        "words": [w.word for w in rare],
        "common": [w.word for w in common],
    }
    return out
