"""Two other ways to treat the index's words the presence test cannot prove, measured against the
test as it is (docs/no-match.md, "A plural takes its singular's floor"), on half of the whole
catalog: plural-floors.sh's model, 10,000-image index and 8,000 calibration scenes, the service's
defaults otherwise. Neither is in the product; both trade recall for "no match" as the test's own
settings do.

- **holders**: the chance count from the images that hold the word's key at all: the index's
  count of them times the share of the calibration's negatives holding it that hold it strongly
  (in place of the index's size times the share of all negatives).
- **ceiling**: a word not proven still matches an image holding its key above a ceiling: a
  quantile of its weights on the calibration's negatives (1: their largest), times a scale.

Usage, from the repository root after plural-floors.sh: .venv/bin/python docs/no-match/unproven-words.py
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from half_catalog import SPEC, calibrated_word, study

from vsparta.bench import no_match
from vsparta.bench.search_runs import recall
from vsparta.service.matching import MatchRule
from vsparta.service.presence import SMOOTHING, Verdict, beyond_chance, needed_count
from vsparta.termindex import open_index


def holders_verdicts(table, inside, outside, rule, tests, by_test) -> dict[str, Verdict]:  # noqa: ANN001
    """The presence test with the chance count from the images that hold the key at all."""
    df: dict[int, int] = {}
    for a in [*inside, *outside]:
        df.update({k: int(v) for k, v in a.stats.df.items()})
    n = inside[0].stats.n_docs
    out = {}
    with open_index(SPEC) as index:
        for word, (key, presence) in tests.items():
            negatives = table.weights[key][~table.positive[by_test[(key, presence)]]]
            strong, holding = int((negatives >= presence.weight).sum()), int((negatives > 0).sum())
            expected = df.get(key, 0) * (strong + SMOOTHING) / (holding + 1)
            needed = needed_count(expected, rule.presence_alpha, rule.presence_ratio)
            present = needed <= n and beyond_chance(
                index.search({key: 1.0}, k=needed, explain=True), key, presence.weight, needed
            )
            out[word] = Verdict(present, needed, expected)
    return out


def main() -> None:
    loaded = study()
    table, captions, inside, outside = loaded.table, loaded.captions, loaded.inside, loaded.outside
    floors, base = loaded.floors, loaded.base  # no unseen floors: measured before they were made
    by_test = calibrated_word(floors)

    def row(name: str, rule: MatchRule, verdicts: dict[str, Verdict]) -> None:
        ranked, _, _ = no_match.judge(inside, rule, verdicts)
        _, none, _ = no_match.judge(outside, rule, verdicts)
        r10 = recall(ranked, captions)["R@10"]
        print(f"| {name} | {r10:.2f} | {r10 - base:+.2f} | {no_match._pct(none):.1f} |")

    print(f"R@10 without a rule: {base:.2f}\n\n| rule | R@10 | d R@10 | out: no match % |\n|---|---|---|---|")
    for ratio in (1.0, 1.5):
        rule = MatchRule(word_floors=floors, presence_ratio=ratio)
        tests = no_match.tests_of([*inside, *outside], rule)
        row(
            f"the test as it is, ratio {ratio:g}",
            rule,
            no_match.presence_verdicts(SPEC, [*inside, *outside], rule, {}),
        )
        row(f"holders, ratio {ratio:g}", rule, holders_verdicts(table, inside, outside, rule, tests, by_test))
    rule = MatchRule(word_floors=floors)
    tests = no_match.tests_of([*inside, *outside], rule)
    verdicts = no_match.presence_verdicts(SPEC, [*inside, *outside], rule, {})
    for q in (1.0, 0.9999, 0.999):
        for scale in (1.0, 1.25, 1.5):
            raised, passed = dict(floors), dict(verdicts)
            for word, verdict in verdicts.items():
                if not verdict.present:
                    key, presence = tests[word]
                    calibrated = by_test[(key, presence)]
                    ceiling = scale * float(np.quantile(table.weights[key][~table.positive[calibrated]], q))
                    floor = max(raised[calibrated].floor, ceiling) / rule.present_floor_scale
                    raised[calibrated] = replace(raised[calibrated], floor=floor)
                    passed[word] = replace(verdict, present=True)
            row(
                f"ceiling: the {q:g} quantile of the negatives x {scale:g}",
                replace(rule, word_floors=raised),
                passed,
            )


if __name__ == "__main__":
    main()
