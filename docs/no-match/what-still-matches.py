"""Which out queries of half of the whole catalog still show results under the service's defaults,
and through which word (docs/no-match.md, "Function words make no match"): for each informative
word that a shown result holds, whether the presence test proved it, or the calibration never saw it
(its floor is then its key's unseen floor, or the rule's where that is higher; before 2026-12-03
the rule's).

Usage, from the repository root after function-words.sh's indexes exist:
  .venv/bin/python docs/no-match/what-still-matches.py [--function-words-match] MODEL CALIBRATION_INDEX
      INDEX [MORE_MANIFEST ...]
(folders under .cache/hc-whole, as function-words.sh names them; --function-words-match: the rule
before 2026-12-02, function words may match alone); prints a markdown table. For the folders of
half-catalog-full.sh: HC=ITS_HC/half CALIBRATION=calib, and MODEL the trained model's folder:
  HC=DIR/half CALIBRATION=calib .venv/bin/python docs/no-match/what-still-matches.py MODEL calib-index index
"""

from __future__ import annotations

import collections
import os
import sys
from pathlib import Path

from vsparta.bench import no_match
from vsparta.bench.no_match_floors import calibration
from vsparta.model.query_tokenizer import QueryTokenizer
from vsparta.service.matching import MatchRule, count_words, held, with_verdicts, words_of
from vsparta.service.term_floors import FloorRule, unseen_floors, word_floors

S = Path(os.environ.get("HC", ".cache/hc-whole"))
CALIBRATION = os.environ.get("CALIBRATION", "calib2")  # the calibration scenes' folder under S


def main(model: str, calibration_index: str, index: str, *more: str, function_words_match: bool) -> None:
    folder = Path(model) if Path(model, "config.json").exists() else S / model / "final"
    tokenizer = QueryTokenizer.from_pretrained(folder)
    calibration_spec = f"embedded:{S / calibration_index}"
    table = calibration(tokenizer, S / CALIBRATION / "test.jsonl", calibration_spec, "captions")
    manifests = [S / "a/train.jsonl", S / "a/test.jsonl", *(S / m for m in more)]
    captions = no_match.absent_object_captions([S / "b/test.jsonl"], manifests)
    spec = f"embedded:{S / index}"
    answers = no_match.collect(tokenizer, spec, captions)
    rule = MatchRule(
        word_floors=word_floors(table, FloorRule()),
        function_words_match=function_words_match,
        unseen_floors=unseen_floors(table, FloorRule().unseen_quantile),
    )
    verdicts = no_match.presence_verdicts(spec, answers, rule, {})
    found: collections.Counter = collections.Counter()
    example: dict = {}
    shown = 0
    for caption, answer in zip(captions, answers, strict=True):
        counts = with_verdicts(
            count_words(words_of(answer.tokens), answer.ids, answer.stats, rule), verdicts, rule
        )
        words = {
            (w.word, "proven beyond chance" if w.verdict else "not calibrated")
            for h in answer.hits[: no_match.K]
            for w in counts.informative
            if held(h, w)
        }
        shown += bool(words)
        for w in words:
            found[w] += 1
            example.setdefault(w, caption.text)
    note = "; the rule before 2026-12-02: function words may match alone" if function_words_match else ""
    print(f"{shown} of {len(captions)} out queries show results ({index}, the service's defaults{note}).\n")
    print("| word | why it matches | queries | e.g. |\n|---|---|---|---|")
    for (word, why), n in found.most_common():
        print(f"| {word} | {why} | {n} | {example[(word, why)]} |")


if __name__ == "__main__":
    args = sys.argv[1:]
    before = args[:1] == ["--function-words-match"]
    main(*args[before:], function_words_match=before)
