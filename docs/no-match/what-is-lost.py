"""Which of the index's own test captions lose their image from the first ten under the service's
defaults, and why, word by word (docs/no-match.md, "A plural takes its singular's floor"): for each
informative word of a caption whose image the rule left out, what the image holds of it: no needed
piece, its key under the floor (calibrated or not), or a word the presence test did not prove.

Usage, from the repository root after plural-floors.sh's indexes exist:
  .venv/bin/python docs/no-match/what-is-lost.py [--no-plural-floors] MODEL CALIBRATION_INDEX INDEX
(folders under .cache/hc-whole); prints a markdown table.
"""

from __future__ import annotations

import collections
import sys
from pathlib import Path

from vsparta.bench import no_match
from vsparta.bench.no_match_floors import calibration
from vsparta.bench.search_runs import caption_queries
from vsparta.model.query_tokenizer import QueryTokenizer
from vsparta.service.matching import MatchRule, count_words, held, select, with_verdicts, words_of
from vsparta.service.term_floors import FloorRule, unseen_floors, word_floors

S = Path(".cache/hc-whole")


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


def main(model: str, calibration_index: str, index: str, *, plural_floors: bool) -> None:
    tokenizer = QueryTokenizer.from_pretrained(S / model / "final")
    table = calibration(tokenizer, S / "calib2/test.jsonl", f"embedded:{S / calibration_index}", "captions")
    captions = caption_queries(S / "a/test.jsonl")
    spec = f"embedded:{S / index}"
    answers = no_match.collect(tokenizer, spec, captions)
    rule = MatchRule(
        word_floors=word_floors(table, FloorRule()),
        plural_floors=plural_floors,
        unseen_floors=unseen_floors(table, FloorRule().unseen_quantile),
    )
    verdicts = no_match.presence_verdicts(spec, answers, rule, {})
    reasons: collections.Counter = collections.Counter()
    words: collections.Counter = collections.Counter()
    example: dict = {}
    lost = found = 0
    for caption, answer in zip(captions, answers, strict=True):
        before = [h for h in answer.hits[: no_match.K] if h.id == caption.target]
        if not before:
            continue
        found += 1
        counts = with_verdicts(
            count_words(words_of(answer.tokens), answer.ids, answer.stats, rule), verdicts, rule
        )
        kept = select(answer.hits, counts, rule, require_match=True, min_score=0.0)
        if caption.target in [h.id for h in kept[: no_match.K]]:
            continue
        lost += 1
        target = before[0]
        if not any(h.id == caption.target for h in kept):
            states = sorted({why(target, w, rule) for w in counts.informative})
            reason = " / ".join(states) or "no informative word"
        else:
            reason = "matches, pushed below ten by results the rule moved up"
        reasons[reason] += 1
        example.setdefault(reason, caption.text)
        for w in counts.informative:
            if not held(target, w):
                words[(w.word, why(target, w, rule))] += 1
    print(
        f"{lost} of the {found} captions whose image is among the first ten without the rule lose it "
        f"({index}, the service's defaults, plural floors {'on' if plural_floors else 'off'}).\n"
    )
    print("| what the image holds of the caption's informative words | captions | e.g. |\n|---|---|---|")
    for reason, n in reasons.most_common():
        print(f"| {reason} | {n} | {example[reason]} |")
    print(
        "\nThe words most often not held by the caption's image:\n\n| word | why | captions |\n|---|---|---|"
    )
    for (word, state), n in words.most_common(20):
        print(f"| {word} | {state} | {n} |")


if __name__ == "__main__":
    args = sys.argv[1:]
    off = "--no-plural-floors" in args
    main(*[a for a in args if a != "--no-plural-floors"], plural_floors=not off)
