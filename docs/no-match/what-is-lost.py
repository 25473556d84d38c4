"""Which of the index's own test captions lose their image from the first ten under the service's
defaults, and why, word by word (docs/no-match.md, "A plural takes its singular's floor"): for each
informative word of a caption whose image the rule left out, what the image holds of it: no needed
piece, its key under the floor (calibrated or not), or a word the presence test did not prove.

Usage, from the repository root after plural-floors.sh's indexes exist:
  .venv/bin/python docs/no-match/what-is-lost.py [--no-plural-floors] MODEL CALIBRATION_INDEX INDEX
(folders under .cache/hc-whole); prints a markdown table.
"""

from __future__ import annotations

import sys
from pathlib import Path

from half_catalog import lost as lost_of

from vsparta.bench import no_match
from vsparta.bench.no_match_floors import calibration
from vsparta.bench.search_runs import caption_queries
from vsparta.model.query_tokenizer import QueryTokenizer
from vsparta.service.matching import MatchRule
from vsparta.service.term_floors import FloorRule, unseen_floors, word_floors

S = Path(".cache/hc-whole")


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
    found = lost_of(captions, answers, rule, verdicts)
    lost, words = found.lost, found.words
    print(
        f"{lost} of the {found.found} captions whose image is among the first ten without the rule lose it "
        f"({index}, the service's defaults, plural floors {'on' if plural_floors else 'off'}).\n"
    )
    print(found.table())
    print(
        "\nThe words most often not held by the caption's image:\n\n| word | why | captions |\n|---|---|---|"
    )
    for (word, state), n in words.most_common(20):
        print(f"| {word} | {state} | {n} |")


if __name__ == "__main__":
    args = sys.argv[1:]
    off = "--no-plural-floors" in args
    main(*[a for a in args if a != "--no-plural-floors"], plural_floors=not off)
