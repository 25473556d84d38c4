"""How far the presence test is from the best a test over the index could do (docs/no-match.md,
"What a perfect presence test would leave, and a larger calibration"), on half of the whole
catalog, beside the service's defaults:

- **perfect**: a word is beyond chance exactly when it names an object of the index's images (a
  name, alias or category, or its plural; never a caption template's word). No test of the index's
  weights can do better; what it still costs in recall is the floors' (an image's weight of a word
  the index holds), and what still matches out queries is the words no calibration saw.
- **scans**: the test at one strong weight (the rule before 2026-12-04), at the service's seven
  (its default since), and at other sets of strong weights (quantiles of the key's weights on the
  calibration's positives), beyond chance at any of them, alpha divided by their number
  (Bonferroni): a word the model writes on its own images far above its look-alikes is proven by a
  few of them; or, **joint**, alpha shared by the weights' exact joint chance
  (``MatchRule.presence_joint``), which lets a finer scan (seventeen weights) cost no more.

Each with a proven word's floor at the service's 0.75 of its calibrated one, and at 0. Last, a
bound on **any** rule that asks a result to hold a word naming what the query asks for: the in
queries whose image is among the first ten without a rule but holds no object word of its caption
at all (not every needed piece, at any weight); such a rule loses each of them. Not in the product.
Usage, from the repository root (half_catalog.py's environment names the folders):
  .venv/bin/python docs/no-match/presence-bound.py
"""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

from half_catalog import MANIFESTS, SPEC, lost, study

from vsparta.bench import no_match
from vsparta.bench.no_match_floors import linking_words, object_words
from vsparta.bench.search_runs import recall
from vsparta.core.manifest import read_manifest
from vsparta.service.matching import MatchRule, count_words, words_of
from vsparta.service.presence import Verdict
from vsparta.service.term_floors import FloorRule, word_floors

SCANS = {  # other scans' quantiles beside the main 0.65 (the service's: FloorRule.presence_scan)
    "scan of five strong weights": (0.35, 0.5, 0.8, 0.9),
    "scan of three high strong weights": (0.8, 0.9),
}
FINE = tuple(q / 100 for q in range(10, 100, 5) if q != 65)  # seventeen weights beside 0.65


def perfect_verdicts(tests: dict, tokenizer, manifests: list) -> dict[str, Verdict]:  # noqa: ANN001
    """Beyond chance exactly when the word names an object of the index's images."""
    drawn = {o["name"] for m in manifests for r in read_manifest(m) for o in r.metadata["objects"]}
    every = SimpleNamespace(metadata={"objects": [{"name": n} for n in sorted(drawn)]})
    held = {w.text for w in object_words(tokenizer, every, linking_words())}
    return {w: Verdict(w in held, 0, 0.0) for w in tests}


def without_object(loaded, rule: MatchRule) -> str:  # noqa: ANN001
    """How many in queries find their image among the first ten though it holds none of the caption's
    object words (each needed piece, at any weight), in points of R@10."""
    records = {r.id: r for m in MANIFESTS for r in read_manifest(m)}
    linking = linking_words()
    found = lucky = 0
    for caption, answer in zip(loaded.captions, loaded.inside, strict=True):
        target = next((h for h in answer.hits[: no_match.K] if h.id == caption.target), None)
        if target is None:
            continue
        found += 1
        objects = {w.text for w in object_words(loaded.tokenizer, records[caption.target], linking)}
        counts = count_words(words_of(answer.tokens), answer.ids, answer.stats, rule)
        terms = target.contributions or {}
        held = [w for w in counts.words if w.word in objects and all(i in terms for i in w.needed)]
        lucky += not held
    share = 100.0 * lucky / len(loaded.captions)
    return f"{lucky} of the {found} in queries found in the first ten hold none: {share:.2f} points of R@10."


def main() -> None:
    loaded = study()
    table, captions, inside, outside = loaded.table, loaded.captions, loaded.inside, loaded.outside
    rule, base = loaded.defaults, loaded.base
    tests = no_match.tests_of([*inside, *outside], rule)
    in_words = set(no_match.tests_of(inside, rule))
    indexed = inside[0].stats.n_docs

    def scanning(scan: tuple[float, ...], joint: bool = False) -> dict[str, Verdict]:
        """The service's test with the floors' presence calibrated at ``scan`` (the same floors),
        alpha shared by Bonferroni or ``joint``."""
        floors = word_floors(table, FloorRule(presence_scan=scan))
        tested = replace(rule, word_floors=floors, presence_joint=joint)
        return no_match.presence_verdicts(SPEC, [*inside, *outside], tested, {})

    kinds = {
        "one strong weight (before 2026-12-04)": scanning(()),
        "the service's scan, Bonferroni": scanning(FloorRule().presence_scan),
        "the service's scan, joint": scanning(FloorRule().presence_scan, joint=True),
        **{name: scanning(scan) for name, scan in SCANS.items()},
        "a finer scan (seventeen weights), Bonferroni": scanning(FINE),
        "a finer scan (seventeen weights), joint": scanning(FINE, joint=True),
        "perfect": perfect_verdicts(tests, loaded.tokenizer, MANIFESTS),
    }
    print(f"{indexed:,} images; R@10 without a rule: {base:.2f}; {len(outside)} out queries.\n")
    print("| test | proven: in words | out words | floor scale | R@10 | d R@10 | out: no match % |")
    print("|---|---|---|---|---|---|---|")
    for name, verdicts in kinds.items():
        ins = [verdicts[w].present for w in tests if w in in_words]
        outs = [verdicts[w].present for w in tests if w not in in_words]
        for scale in (rule.present_floor_scale, 0.0):
            scaled = replace(rule, present_floor_scale=scale)
            ranked, _, _ = no_match.judge(inside, scaled, verdicts)
            _, none, _ = no_match.judge(outside, scaled, verdicts)
            r10 = recall(ranked, captions)["R@10"]
            print(
                f"| {name} | {no_match._pct(ins):.1f} % of {len(ins)} | {no_match._pct(outs):.1f} % of "
                f"{len(outs)} | {scale:g} | {r10:.2f} | {r10 - base:+.2f} | {no_match._pct(none):.1f} |"
            )
    print(f"\nAny rule asking for an object word: {without_object(loaded, rule)}")
    for name in ("one strong weight (before 2026-12-04)", "the service's scan, joint", "perfect"):
        found = lost(captions, inside, replace(rule, present_floor_scale=0.0), kinds[name])
        print(
            f"\n{name}, a proven word's floor 0: {found.lost} of the {found.found} in queries whose image is"
        )
        print(f"among the first ten without a rule lose it.\n\n{found.table()}")


if __name__ == "__main__":
    main()
