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


def brute_family_chance(expected: list[float], counts: list[int]) -> float:
    """The chance some nested count reaches its own, by summing over every increment (small cases):
    expected from the lowest weight to the highest (largest chance count first)."""
    pairs = zip(expected[:-1], expected[1:], strict=True)  # each weight's and the next higher one's
    increments = [*(a - b for a, b in pairs), expected[-1]]
    steps = [[math.exp(-m) * m**i / math.factorial(i) for i in range(40)] for m in increments]
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
    settings = make_settings(every_engine_spec, model_path=calibrated)
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
    one = make_settings(every_engine_spec, model_path=calibrated, match_presence_scan=False)
    with TestClient(create_app(one), raise_server_exceptions=False) as c:  # the scan off: its one weight
        r = c.post("/search", json={"query": "red", "k": 5}).json()
        assert r["results"] == [] and r["query_word_stats"][0]["beyond_chance"] is False
    red["null_rate"], red["scan"] = 0.7 / indexed, [[3.0, 0.7 / indexed]]  # one weight twice over
    path.write_text(json.dumps(body))  # Bonferroni asks 4 strong images; their joint chance is one's: 3
    assert scan_counts([0.7, 0.7], 0.05) == (4, 4) and scan_counts([0.7, 0.7], 0.05, joint=True) == (3, 3)
    for joint, found in ((False, []), (True, ["red-cube", "red-cylinder", "red-sphere"])):
        shared = make_settings(every_engine_spec, model_path=calibrated, match_presence_joint=joint)
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
