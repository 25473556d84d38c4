"""The presence test (``service.presence``): a calibrated word matches no image of an index that
holds it strongly no more often than the model's look-alikes give by chance.

The corpus (``service_testdata``): "red" weighs 3.0 on the 3 red images and nothing elsewhere.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from vsparta.service.app import create_app
from vsparta.service.matching import MatchRule, QueryCounts, WordCount, held, to_test, with_verdicts
from vsparta.service.presence import (
    JOINT_DEPTH,
    MAX_DEPTH,
    Presence,
    Verdict,
    beyond_chance,
    family_chance,
    needed_count,
    null_rate,
    scan_counts,
)
from vsparta.service.results import describe
from vsparta.service.settings import ServiceSettings
from vsparta.service.term_floors import FILE
from vsparta.termindex import Hit


def poisson_tail(c: int, mean: float) -> float:
    """P(X >= c), X ~ Poisson(mean), summed directly."""
    return 1.0 - sum(math.exp(-mean) * mean**i / math.factorial(i) for i in range(c))


@pytest.mark.parametrize("mean", [0.05, 0.6, 2.5, 10.0, 80.0])
@pytest.mark.parametrize("alpha", [0.05, 0.001])
def test_the_count_needed_is_the_least_with_a_poisson_tail_under_alpha(mean: float, alpha: float) -> None:
    c = needed_count(mean, alpha)
    assert poisson_tail(c, mean) < alpha <= poisson_tail(c - 1, mean)


def test_the_count_needed_in_edge_cases() -> None:
    assert needed_count(0.0, 0.05) == 1  # no image holds it by chance: one strong image proves it
    assert needed_count(2.5, 0.05) == 6  # P(X >= 6) = 0.042, P(X >= 5) = 0.109
    assert needed_count(50_000.0, 0.05) == MAX_DEPTH + 1  # never asked of an engine
    assert needed_count(10.0, 0.05, ratio=2.0) == 20  # the tail alone asks 16: also twice the chance count
    assert needed_count(0.6, 0.05, ratio=2.0) == needed_count(0.6, 0.05) == 3  # the tail asks more
    assert needed_count(6_000.0, 0.05, ratio=2.0) == MAX_DEPTH + 1
    assert null_rate(0, 9) == 0.05 and null_rate(3, 99) == 0.035  # smoothed: never proven absent


def negative_binomial(k: int, mean: float, spread: float) -> float:
    """P(X = k), X negative binomial with ``mean`` and variance mean x (1 + spread), by its formula."""
    if mean == 0:
        return float(k == 0)
    shape = mean / spread
    log = math.lgamma(shape + k) - math.lgamma(shape) - math.lgamma(k + 1)
    return math.exp(log - shape * math.log1p(spread) + k * math.log(spread / (1 + spread)))


def poisson(k: int, mean: float) -> float:
    return math.exp(-mean) * mean**k / math.factorial(k)


def tail(c: int, mean: float, spread: float) -> float:
    """P(X >= c) for the negative binomial, summed directly (far enough for these means)."""
    return 1.0 - sum(negative_binomial(i, mean, spread) for i in range(c))


def brute_family_chance(expected: list[float], counts: list[int], spread: float = 0.0) -> float:
    """The chance some nested count reaches its own, by summing over every increment (small cases):
    expected from the lowest weight to the highest (largest chance count first)."""
    pairs = zip(expected[:-1], expected[1:], strict=True)  # each weight's and the next higher one's
    increments = [*(a - b for a, b in pairs), expected[-1]]
    pmf = (lambda i, m: negative_binomial(i, m, spread)) if spread else poisson
    steps = [[pmf(i, m) for i in range(60)] for m in increments]
    none = 0.0

    def walk(level: int, below: int, chance: float) -> None:  # from the highest weight down
        nonlocal none
        if level < 0:
            none += chance
            return
        for d, p in enumerate(steps[level]):
            if below + d >= counts[level]:
                break
            walk(level - 1, below + d, chance * p)

    walk(len(expected) - 1, 0, 1.0)
    return 1.0 - none


@pytest.mark.parametrize(
    "expected", [[4.0, 1.5, 0.3], [0.9, 0.9, 0.2], [12.0, 3.0, 2.5, 0.05], [2.0, 0.0, 0.0]]
)
def test_the_joint_chance_of_a_scan_is_exact(expected: list[float]) -> None:
    bonferroni = scan_counts(expected, 0.05)
    joint = scan_counts(expected, 0.05, joint=True)
    for counts in (bonferroni, joint):
        assert family_chance(expected, counts) == pytest.approx(brute_family_chance(expected, list(counts)))
    # nested weights' counts move together: Bonferroni's true chance is well under alpha, the joint
    # test spends it all and never asks for more images at any weight
    assert family_chance(expected, bonferroni) <= family_chance(expected, joint) <= 0.05
    assert all(j <= b for j, b in zip(joint, bonferroni, strict=True))
    shuffled = [expected[i] for i in (1, 0, *range(2, len(expected)))]  # the scan's order: main first
    again = scan_counts(shuffled, 0.05, joint=True)
    assert [again[i] for i in (1, 0, *range(2, len(expected)))] == list(joint)


@pytest.mark.parametrize("spread", [0.25, 1.25, 4.0])
@pytest.mark.parametrize("mean", [0.05, 0.6, 5.9, 40.0])
def test_a_calibrations_own_chance_makes_the_count_negative_binomial(mean: float, spread: float) -> None:
    """A null rate counted on m calibration images is uncertain: the index's chance count is then
    negative binomial (``Presence.spread``: n / (m + 1)), its tail the formula's."""
    c = needed_count(mean, 0.05, spread=spread)
    assert tail(c, mean, spread) < 0.05 <= tail(c - 1, mean, spread)
    assert needed_count(mean, 0.05, spread=1e-9) == needed_count(mean, 0.05)  # no spread: Poisson


def test_the_spread_is_the_index_against_its_calibration() -> None:
    assert Presence(3.0, 0.1, negatives=1999).spread(2500) == 1.25  # 2,500 images, 2,000 negatives
    assert Presence(3.0, 0.1, negatives=15_999).spread(10_000) == 0.625
    assert Presence(3.0, 0.1).spread(2500) == 0.0  # calibrated before it was counted: the rate exact
    # a rate from fewer images asks more, but where one image is the question it can ask fewer:
    # the rate of a smoothed half of a strong negative may well be lower still
    assert needed_count(5.9, 0.05, spread=1.25) == 14 > needed_count(5.9, 0.05) == 11
    assert needed_count(0.6, 0.05, spread=1.25) == 4 > needed_count(0.6, 0.05) == 3
    assert needed_count(0.06, 0.05, spread=1.25) == 1 < needed_count(0.06, 0.05) == 2


@pytest.mark.parametrize("spread", [0.6, 1.25])
def test_the_joint_chance_with_a_spread_is_exact(spread: float) -> None:
    expected = [4.0, 1.5, 0.3]
    bonferroni = scan_counts(expected, 0.05, spread=spread)
    joint = scan_counts(expected, 0.05, joint=True, spread=spread)
    for counts in (bonferroni, joint):
        chance = family_chance(expected, counts, spread)
        assert chance == pytest.approx(brute_family_chance(expected, list(counts), spread))
    assert family_chance(expected, bonferroni, spread) <= family_chance(expected, joint, spread) <= 0.05
    assert all(j <= b for j, b in zip(joint, bonferroni, strict=True))


def test_a_large_chance_count_asks_its_own_quantile() -> None:
    """Until 2026-12-05 exp(-mean) underflowed above a mean of 745 and such a word was never proven."""
    c = needed_count(1000.0, 0.05)
    assert 1045 < c < 1060 and c <= MAX_DEPTH
    log_tail = [k * math.log(1000.0) - 1000.0 - math.lgamma(k + 1) for k in range(c - 1, c + 400)]
    assert sum(math.exp(x) for x in log_tail[1:]) < 0.05 <= sum(math.exp(x) for x in log_tail)


def test_the_joint_test_asks_for_fewer_images_and_bounds_what_it_cannot_afford() -> None:
    scan = [12.0, 40.0, 25.0, 18.0, 6.0, 2.5, 1.0]  # the main weight first, as Presence.levels
    bonferroni, joint = scan_counts(scan, 0.05, 1.5), scan_counts(scan, 0.05, 1.5, joint=True)
    assert sum(bonferroni) - sum(joint) >= 3 and family_chance(scan, joint) > 0.04
    assert scan_counts([2.0, 2.0], 0.05, joint=True) == (needed_count(2.0, 0.05),) * 2  # one weight twice
    assert scan_counts([0.7], 0.05, joint=True) == (needed_count(0.7, 0.05),)
    big = [900.0, 2_000.0, 30.0]  # counts above JOINT_DEPTH join by the union bound
    counts = scan_counts(big, 0.05, 1.5, joint=True)
    assert counts[1] > JOINT_DEPTH and family_chance(big, counts) <= 0.05
    assert scan_counts([50_000.0, 3.0], 0.05, joint=True)[0] == MAX_DEPTH + 1  # never asked


def hit(doc_id: str, weight: float) -> Hit:
    return Hit(doc_id, weight, {}, {7: (weight, weight)})


def test_beyond_chance_reads_the_needed_result() -> None:
    hits = [hit("a", 5.0), hit("b", 4.0), hit("c", 1.0)]
    assert beyond_chance(hits, 7, 4.0, 2)  # the second still holds the strong weight
    assert not beyond_chance(hits, 7, 4.0, 3)  # the third does not
    assert not beyond_chance(hits, 7, 1.0, 4)  # fewer results than needed
    assert not beyond_chance([Hit("a", 1.0, {}, {8: (9.0, 9.0)})], 7, 1.0, 1)  # not this key


def test_a_word_not_beyond_chance_is_held_by_no_image_and_says_why() -> None:
    test = Presence(3.0, 0.1)
    word = WordCount("mouse", ("mouse",), (7,), 4, False, 0.0, (7,), 7, 2.0, presence=test)
    counts = QueryCounts(100, [word])
    rule = MatchRule()
    assert to_test(counts, rule) == {"mouse": (7, test)}
    assert to_test(counts, MatchRule(presence_alpha=0)) == {}  # the test off
    strong = hit("parrot", 6.0)
    assert held(strong, word)
    chance = with_verdicts(counts, {"mouse": Verdict(False, 25, 10.0)}, rule)
    assert not held(strong, chance.words[0])
    said = describe([strong], [], [], chance, rule, require_match=True, min_score=0.0)
    assert said["no_match"]["words"] == ["mouse"]
    assert said["no_match"]["reason"] == (
        "The images that hold mouse are no more than the model's look-alikes give by chance "
        "(10.0 of 100 images expected; 25 needed), so none counts as a match."
    )
    assert said["query_word_stats"][0]["beyond_chance"] is False
    # a template word the model writes on nearly everything ("picture"): more needed than indexed
    everywhere = with_verdicts(counts, {"mouse": Verdict(False, 101, 99.5)}, rule)
    said = describe([strong], [], [], everywhere, rule, require_match=True, min_score=0.0)
    assert said["no_match"]["reason"] == (
        "The model writes mouse strongly on nearly every image (its look-alikes alone give 99.5 of 100 "
        "images by chance), so it tells no image apart and none counts as a match."
    )
    present = with_verdicts(counts, {"mouse": Verdict(True, 25, 10.0)}, rule).words[0]
    assert present.floor == 2.0 * rule.present_floor_scale and held(hit("mouse", 1.6), present)
    assert not held(hit("mouse", 1.4), present)


def test_the_service_asks_each_engine_whether_a_word_is_beyond_chance(
    calibrated: Path, every_engine_spec: str, make_settings: Callable[..., ServiceSettings]
) -> None:
    path = calibrated / FILE
    body = json.loads(path.read_text())
    red = body["words"]["red"]
    # 3.0 on each of the 3 red images, on none of the 9 others: strong 3.0, null rate 0.5 / 10
    assert red["strong"] == pytest.approx(3.0) and red["null_rate"] == pytest.approx(0.05)
    same = 1 + len(red["scan"])  # the scan's strong weights: each 3.0, so their joint chance is one's
    exact = {"match_presence_alpha": 0.05, "match_presence_predictive": False}  # defaults until 2026-12-05
    settings = make_settings(every_engine_spec, model_path=calibrated, **exact)
    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        r = c.post("/search", json={"query": "red", "k": 5}).json()
        indexed = r["indexed_images"]
        expected = 0.05 * indexed
        needed = scan_counts([expected] * same, 0.05, 1.5, joint=True)[0]
        assert needed == needed_count(expected, 0.05) < scan_counts([expected] * same, 0.05, 1.5)[0]
        assert needed > 3  # 3 strong images of 19 prove nothing when 5 % of the others may hold it so
        assert r["results"] == [] and r["no_match"]["words"] == ["red"]
        assert r["query_word_stats"][0]["beyond_chance"] is False
        assert f"({expected:.1f} of {indexed:,} images expected; {needed} needed)" in r["no_match"]["reason"]
        old = c.post("/search", json={"query": "red", "k": 5, "require_match": False}).json()
        assert {x["id"] for x in old["results"]} >= {"red-cube", "red-cylinder", "red-sphere"}
    off = make_settings(every_engine_spec, model_path=calibrated, match_presence_alpha=0)
    with TestClient(create_app(off), raise_server_exceptions=False) as c:  # the test off: floors alone
        r = c.post("/search", json={"query": "red", "k": 5}).json()
        assert sorted(x["id"] for x in r["results"]) == ["red-cube", "red-cylinder", "red-sphere"]
        assert r["query_word_stats"][0]["beyond_chance"] is None
    red["scan"] = [[3.0, 0.001]]  # a scan's weight the look-alikes reach far less often proves it there
    path.write_text(json.dumps(body))
    assert needed_count(0.05 * indexed, 0.025) > 3 and needed_count(0.001 * indexed, 0.025) == 1
    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        r = c.post("/search", json={"query": "red", "k": 5}).json()
        assert sorted(x["id"] for x in r["results"]) == ["red-cube", "red-cylinder", "red-sphere"]
        assert r["query_word_stats"][0]["beyond_chance"] is True
    one = make_settings(every_engine_spec, model_path=calibrated, match_presence_scan=False, **exact)
    with TestClient(create_app(one), raise_server_exceptions=False) as c:  # the scan off: its one weight
        r = c.post("/search", json={"query": "red", "k": 5}).json()
        assert r["results"] == [] and r["query_word_stats"][0]["beyond_chance"] is False
    red["null_rate"], red["scan"] = 0.7 / indexed, [[3.0, 0.7 / indexed]]  # one weight twice over
    path.write_text(json.dumps(body))  # Bonferroni asks 4 strong images; their joint chance is one's: 3
    assert scan_counts([0.7, 0.7], 0.05) == (4, 4) and scan_counts([0.7, 0.7], 0.05, joint=True) == (3, 3)
    for joint, found in ((False, []), (True, ["red-cube", "red-cylinder", "red-sphere"])):
        shared = make_settings(every_engine_spec, model_path=calibrated, match_presence_joint=joint, **exact)
        with TestClient(create_app(shared), raise_server_exceptions=False) as c:
            results = c.post("/search", json={"query": "red"}).json()["results"]
            assert sorted(x["id"] for x in results) == found
    del red["scan"]  # one strong weight, as calibrated before the scan
    red["null_rate"] = 0.01  # as if calibrated on far more images: now 2 strong ones are beyond chance
    path.write_text(json.dumps(body))
    assert needed_count(0.01 * indexed, 0.05) == 2
    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        r = c.post("/search", json={"query": "red", "k": 5}).json()
        assert sorted(x["id"] for x in r["results"]) == ["red-cube", "red-cylinder", "red-sphere"]
        assert r["query_word_stats"][0]["beyond_chance"] is True
        assert "no_match" not in r


def test_a_rate_from_few_calibration_images_proves_less_on_each_engine(
    calibrated: Path, every_engine_spec: str, make_settings: Callable[..., ServiceSettings]
) -> None:
    """The same 3 red images of 3.0 against a chance count of 0.5: Poisson asks 3 and they prove
    red; a rate counted on 9 calibration images (its negatives: spread n / 10) asks 4."""
    path = calibrated / FILE
    body = json.loads(path.read_text())
    red = body["words"]["red"]
    assert red["negatives"] == 9
    at = {"match_presence_alpha": 0.05}
    exact = make_settings(every_engine_spec, model_path=calibrated, match_presence_predictive=False, **at)
    predictive = make_settings(every_engine_spec, model_path=calibrated, match_presence_predictive=True, **at)
    with TestClient(create_app(exact), raise_server_exceptions=False) as c:
        indexed = c.post("/search", json={"query": "red"}).json()["indexed_images"]
    del red["scan"]
    red["null_rate"] = 0.5 / indexed
    path.write_text(json.dumps(body))
    spread = indexed / 10
    assert needed_count(0.5, 0.05) == 3 and needed_count(0.5, 0.05, spread=spread) == 4
    reds = ["red-cube", "red-cylinder", "red-sphere"]
    for settings, found in ((exact, reds), (predictive, [])):
        with TestClient(create_app(settings), raise_server_exceptions=False) as c:
            r = c.post("/search", json={"query": "red", "k": 5}).json()
            assert sorted(x["id"] for x in r["results"]) == found
            assert r["query_word_stats"][0]["beyond_chance"] is bool(found)
    del red["negatives"]  # calibrated before the count was kept: the file's 12 calibration images
    path.write_text(json.dumps(body))
    assert needed_count(0.5, 0.05, spread=indexed / 13) == 4
    with TestClient(create_app(predictive), raise_server_exceptions=False) as c:
        assert c.post("/search", json={"query": "red"}).json()["results"] == []
    del body["calibration_images"]  # nor how many images: the rate taken as exact
    path.write_text(json.dumps(body))
    with TestClient(create_app(predictive), raise_server_exceptions=False) as c:
        assert sorted(x["id"] for x in c.post("/search", json={"query": "red"}).json()["results"]) == reds
