"""What the half-of-the-whole-catalog studies beside it read (docs/no-match.md): plural-floors.sh's
model, its 10,000-image index and 8,000 calibration scenes under .cache/hc-whole, and the answers
of the index's own test captions (in) and of the captions naming only the other half (out).

Another study's folders by environment: HC (the scenes' folder), INDEX and MORE (the index's folder
under HC and the manifests of its images beyond a/train and a/test, space-separated), MODEL (the
model's folder), CALIBRATION and CALIBRATION_INDEX (the calibration scenes' folder, or a manifest
ending in .jsonl, and their index under HC). For half-catalog-full.sh's half split: HC=ITS_HC/half INDEX=index MORE= MODEL=...
CALIBRATION=calib CALIBRATION_INDEX=calib-index."""

from __future__ import annotations

import collections
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vsparta.bench import no_match
from vsparta.bench.no_match_floors import calibration
from vsparta.bench.search_runs import Caption, caption_queries, recall
from vsparta.model.query_tokenizer import QueryTokenizer
from vsparta.service.matching import MatchRule, WordFloor, count_words, held, select, with_verdicts, words_of
from vsparta.service.term_floors import FloorRule, unseen_floors, word_floors

S = Path(os.environ.get("HC", ".cache/hc-whole"))
SPEC = f"embedded:{S / os.environ.get('INDEX', 'index-words-10k')}"
MORE = os.environ.get("MORE", "a2-more.jsonl").split()
MANIFESTS = [S / "a/train.jsonl", S / "a/test.jsonl", *(S / m for m in MORE)]  # the index's images
MODEL = Path(os.environ.get("MODEL", S / "model-words/final"))
_CALIBRATION = os.environ.get("CALIBRATION", "calib2")
CALIBRATION = S / _CALIBRATION if _CALIBRATION.endswith(".jsonl") else S / _CALIBRATION / "test.jsonl"
CALIBRATION_SPEC = f"embedded:{S / os.environ.get('CALIBRATION_INDEX', 'calib-index-words-8k')}"


@dataclass
class Study:
    tokenizer: QueryTokenizer
    table: Any  # term_floors.Calibration of the calibration scenes, positives from captions
    captions: list[Caption]  # the in queries
    inside: list[no_match.Answer]
    outside: list[no_match.Answer]

    @property
    def floors(self) -> dict[str, WordFloor]:
        """Each calibrated word's floor and presence test, by the service's default ``FloorRule``."""
        return word_floors(self.table, FloorRule())

    @property
    def defaults(self) -> MatchRule:
        """The service's default rule: those floors, and the unseen floors of words never calibrated."""
        return MatchRule(
            word_floors=self.floors, unseen_floors=unseen_floors(self.table, FloorRule().unseen_quantile)
        )

    @property
    def base(self) -> float:
        """R@10 of the in queries without any rule."""
        return recall([[h.id for h in a.hits[: no_match.K]] for a in self.inside], self.captions)["R@10"]


def calibrated_word(floors: dict[str, WordFloor]) -> dict[tuple, str]:
    """Per presence test (key and ``Presence``), the calibrated word whose test it is."""
    return {(f.key, f.presence): w for w, f in floors.items() if f.presence}


def study() -> Study:
    """Load the model and calibration, and search every in and out query once (a few minutes)."""
    tokenizer = QueryTokenizer.from_pretrained(MODEL)
    table = calibration(tokenizer, CALIBRATION, CALIBRATION_SPEC, "captions")
    captions = caption_queries(S / "a/test.jsonl")
    inside = no_match.collect(tokenizer, SPEC, captions)
    outside = no_match.collect(
        tokenizer, SPEC, no_match.absent_object_captions([S / "b/test.jsonl"], MANIFESTS)
    )
    return Study(tokenizer, table, captions, inside, outside)


def why(hit, word, rule: MatchRule) -> str:  # noqa: ANN001
    """What ``hit`` (the caption's image) holds of ``word``, in a few words."""
    terms = hit.contributions or {}
    calibrated = word.presence is not None
    if word.by_chance:
        return "not proven beyond chance"
    if not all(i in terms for i in word.needed):
        return "a needed piece missing"
    if held(hit, word):
        return "held"
    return "under its calibrated floor" if calibrated else "under the rule's floor"


@dataclass
class Lost:
    """The in queries whose image is among the first ten without a rule (``found``) and lose it under
    one (``lost``): per reason, what the image holds of the caption's informative words, and which
    words it does not hold, each with an example caption."""

    found: int = 0
    lost: int = 0
    reasons: collections.Counter = field(default_factory=collections.Counter)
    words: collections.Counter = field(default_factory=collections.Counter)
    example: dict = field(default_factory=dict)

    def table(self) -> str:
        """The reasons as a markdown table, the most frequent first."""
        rows = [f"| {r} | {n} | {self.example[r]} |" for r, n in self.reasons.most_common()]
        head = "| what the image holds of the caption's informative words | captions | e.g. |\n|---|---|---|"
        return "\n".join([head, *rows])


def lost(captions: list[Caption], answers: list[no_match.Answer], rule: MatchRule, verdicts: dict) -> Lost:
    """Which in queries lose their image from the first ten under ``rule`` and ``verdicts``, and why."""
    out = Lost()
    for caption, answer in zip(captions, answers, strict=True):
        before = [h for h in answer.hits[: no_match.K] if h.id == caption.target]
        if not before:
            continue
        out.found += 1
        counts = with_verdicts(
            count_words(words_of(answer.tokens), answer.ids, answer.stats, rule), verdicts, rule
        )
        kept = select(answer.hits, counts, rule, require_match=True, min_score=0.0)
        if caption.target in [h.id for h in kept[: no_match.K]]:
            continue
        out.lost += 1
        target = before[0]
        if not any(h.id == caption.target for h in kept):
            reason = (
                " / ".join(sorted({why(target, w, rule) for w in counts.informative}))
                or "no informative word"
            )
        else:
            reason = "matches, pushed below ten by results the rule moved up"
        out.reasons[reason] += 1
        out.example.setdefault(reason, caption.text)
        for w in counts.informative:
            if not held(target, w):
                out.words[(w.word, why(target, w, rule))] += 1
    return out
