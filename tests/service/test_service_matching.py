"""The match rule (``service.matching``) on hand-made hits: each of its clauses, one at a time.

Index of 100 images; "a" in 90 (common), "bird" in 30, "peacock" + "##s" in 5 / 60, "five" in 28,
"clock" in none, "fa" + "##uce" + "##t" (faucet) in 12 / 3 / 50, "lo" + "##lli" + "##pop" (lollipop)
in 40 / 40 / 0 (a model that never writes ``##pop``), "is" in 40 and "left" in 35 (not common).
Engine answers are written out here; the engines' own answers are in ``test_service_no_match.py``.
"""

from __future__ import annotations

import pytest

from vsparta.service.english import is_number, singular_forms
from vsparta.service.matching import (
    MatchRule,
    WordFloor,
    calibration_of,
    count_words,
    is_match,
    select,
    words_of,
)
from vsparta.service.presence import Presence
from vsparta.service.results import describe
from vsparta.termindex import Hit
from vsparta.termindex.base import TermStatistics

IDS = {"a": 1, "bird": 2, "peacock": 3, "##s": 4, "five": 5, "clock": 6, "fa": 7, "##uce": 8, "##t": 9}
IDS |= {"lo": 10, "##lli": 11, "##pop": 12, "is": 13, "left": 14}
STATS = TermStatistics(
    100, {1: 90, 2: 30, 3: 5, 4: 60, 5: 28, 6: 0, 7: 12, 8: 3, 9: 50, 10: 40, 11: 40, 13: 40, 14: 35}
)
PIECES = {
    "peacocks": ["peacock", "##s"],
    "faucet": ["fa", "##uce", "##t"],
    "lollipop": ["lo", "##lli", "##pop"],
}


def hit(doc_id: str, **weights: float) -> Hit:
    terms = {IDS[t.replace("_", "##")]: (w, w) for t, w in weights.items()}
    return Hit(doc_id, sum(weights.values()), {}, terms)


def counts_of(text: str, rule: MatchRule):  # noqa: ANN201
    tokens = [t for word in text.split() for t in PIECES.get(word, [word])]
    return count_words(words_of(tokens), IDS, STATS, rule)


def test_a_common_word_makes_no_match_but_a_telling_one_does() -> None:
    rule = MatchRule(common_share=0.5, min_weight=0.5)
    counts = counts_of("a bird", rule)
    assert [(w.word, w.images, w.common) for w in counts.words] == [("a", 90, True), ("bird", 30, False)]
    assert not is_match(hit("x", a=3.0), counts, rule)
    assert is_match(hit("y", a=1.0, bird=0.6), counts, rule)
    assert not is_match(hit("z", a=1.0, bird=0.4), counts, rule)  # below the weight floor


def test_a_word_of_pieces_needs_each_piece_but_a_plural_ending() -> None:
    rule = MatchRule(common_share=0.5, min_weight=0.5)
    counts = counts_of("faucet", rule)
    assert [(w.word, w.images) for w in counts.words] == [("faucet", 3)]  # its rarest piece's count
    assert not is_match(hit("fax", fa=4.0), counts, rule)  # "fax" begins with the same piece
    assert not is_match(hit("light", fa=0.4, _uce=1.0, _t=3.0), counts, rule)  # the first is weighed
    assert is_match(hit("faucet", fa=4.0, _uce=0.1, _t=3.0), counts, rule)


def test_a_plural_is_held_by_its_stem() -> None:
    rule = MatchRule(common_share=0.5, min_weight=0.5)
    counts = counts_of("peacocks", rule)
    assert [(w.word, w.images) for w in counts.words] == [("peacocks", 5)]  # the stem's count
    assert is_match(hit("stem", peacock=4.0), counts, rule)  # the plural piece is not needed
    assert not is_match(hit("suffix", _s=4.0), counts, rule)  # a suffix alone says nothing


def test_a_number_says_how_many_not_what() -> None:
    five_birds = hit("five-birds", five=6.0, bird=5.0)
    strict, lax = MatchRule(0.5, 0.5), MatchRule(0.5, 0.5, numbers_match=True)
    assert not is_match(five_birds, counts_of("five clock", strict), strict)
    assert is_match(five_birds, counts_of("five clock", lax), lax)
    assert is_match(five_birds, counts_of("five bird", strict), strict)
    said = describe(
        [five_birds], [], [], counts_of("five clock", strict), strict, require_match=True, min_score=0
    )
    assert said["no_match"] == {
        "reason": "No image has clock. five says how many, not what.",
        "words": ["clock"],
        "common": [],
    }


@pytest.mark.parametrize(
    ("word", "allowed", "reason"),
    [
        # "there is a worm" on an index without worms: a model writes "is" on images too, held by 40
        # of 100 (not common), but it joins words; only the object word can make a match
        ("is", "function_words_match", "is joins words and names nothing."),
        # "a clock left of a synagogue": the caption templates place objects, so an index holds
        # "left" (35 of 100 here) on pictures with anything on the left
        ("left", "relation_words_match", "left says where, not what."),
    ],
)
def test_a_word_that_names_nothing_makes_no_match_alone(word: str, allowed: str, reason: str) -> None:
    strict, lax = MatchRule(0.5, 0.5), MatchRule(0.5, 0.5, **{allowed: True})
    holds_it = hit(f"bird-{word}", **{word: 3.0, "bird": 2.0})
    assert not is_match(holds_it, counts_of(f"{word} clock", strict), strict)
    assert is_match(holds_it, counts_of(f"{word} clock", lax), lax)
    assert is_match(holds_it, counts_of(f"{word} bird", strict), strict)
    said = describe(
        [holds_it], [], [], counts_of(f"{word} clock", strict), strict, require_match=True, min_score=0
    )
    assert said["no_match"] == {"reason": f"No image has clock. {reason}", "words": ["clock"], "common": []}


def test_evidence_asks_more_of_a_word_many_images_hold() -> None:
    rule = MatchRule(common_share=0.5, min_weight=0.0, min_evidence=2.0)
    weak_bird = hit("bird", bird=3.0)  # log(4) x idf(30 of 100) = 1.39 x 1.19: too little
    strong_peacock = hit("peacock", peacock=3.0)  # log(4) x idf(5 of 100) = 1.39 x 2.89
    assert not is_match(weak_bird, counts_of("bird", rule), rule)
    assert is_match(strong_peacock, counts_of("peacock", rule), rule)
    said = describe([weak_bird], [], [], counts_of("bird", rule), rule, require_match=True, min_score=0)
    assert (
        said["no_match"]["reason"]
        == "The images that hold bird hold it too weakly for a word that many images hold."
    )


def test_select_keeps_order_and_min_score() -> None:
    rule = MatchRule(0.5, 0.5)
    counts = counts_of("a bird", rule)
    hits = [hit("first", a=9.0), hit("second", bird=2.0), hit("third", bird=1.0)]
    assert [h.id for h in select(hits, counts, rule, require_match=True, min_score=0)] == ["second", "third"]
    assert [h.id for h in select(hits, counts, rule, require_match=True, min_score=1.5)] == ["second"]
    assert [h.id for h in select(hits, counts, rule, require_match=False, min_score=0)] == [
        "first",
        "second",
        "third",
    ]


def test_a_word_held_too_lightly_to_rank_is_named_without_a_floor() -> None:
    rule = MatchRule(common_share=0.5, min_weight=0.0)
    only_a = hit("a-only", a=9.0)  # the images holding "peacock" scored below it
    said = describe([only_a], [], [], counts_of("a peacock", rule), rule, require_match=True, min_score=0)
    assert said["no_match"]["reason"].startswith(
        "The images that hold peacock hold it too weakly to count as a match "
        "(a weight that ranks among the 1 best-scored images)."
    )


def test_a_word_with_its_own_floor_is_held_by_that_floor_the_others_by_the_rules() -> None:
    """``word_floors`` (``vsparta calibrate``) replaces ``min_weight`` for its words only."""
    rule = MatchRule(common_share=0.5, min_weight=0.5, word_floors={"bird": WordFloor((2,), 2, 2.0)})
    bird, peacock = counts_of("bird", rule), counts_of("peacocks", rule)
    assert not is_match(hit("weak", bird=1.0), bird, rule)  # above 0.5, under the word's own 2.0
    assert is_match(hit("strong", bird=2.5), bird, rule)
    assert is_match(hit("p", peacock=0.6), peacock, rule)  # no floor of its own: the rule's 0.5
    floors = {"bird": WordFloor((2,), 2, 2.0)}
    assert MatchRule(word_floors=floors) != MatchRule() and hash(MatchRule(word_floors=floors))


def test_a_plural_the_calibration_never_saw_takes_its_singulars_floor() -> None:
    """Calibration captions said "a peacock" (floor 2.0) but never "peacocks": the plural is held by
    the singular's floor and presence test, not by the rule's 0.5, unless ``plural_floors`` is off."""
    presence = Presence(3.0, 0.01)
    floors = {"peacock": WordFloor((3,), 3, 2.0, presence)}
    rule = MatchRule(0.5, 0.5, word_floors=floors)
    [word] = counts_of("peacocks", rule).words
    assert (word.needed, word.key, word.floor, word.presence) == ((3,), 3, 2.0, presence)
    assert not is_match(hit("look-alike", peacock=1.0), counts_of("peacocks", rule), rule)
    assert is_match(hit("peacocks", peacock=2.5, _s=1.0), counts_of("peacocks", rule), rule)
    off = MatchRule(0.5, 0.5, word_floors=floors, plural_floors=False)
    assert is_match(hit("look-alike", peacock=1.0), counts_of("peacocks", off), off)


def test_a_word_the_calibration_never_saw_needs_its_keys_unseen_floor() -> None:
    """No calibration caption says "faucet" (key ``fa``, id 7) or "peacocks": their keys' unseen
    floors (the weight look-alikes reach in the calibration images) replace the rule's 0.5 where
    higher; a calibrated word and a plural taking its singular's floor keep theirs."""
    unseen = {7: 3.0, 3: 0.2, 2: 9.0}
    rule = MatchRule(0.5, 0.5, word_floors={"bird": WordFloor((2,), 2, 1.0)}, unseen_floors=unseen)
    faucet = counts_of("faucet", rule)
    assert [w.floor for w in faucet.words] == [3.0]
    look_alike = hit("look-alike", fa=2.5, _uce=1.0, _t=1.0)
    assert not is_match(look_alike, faucet, rule)
    assert is_match(hit("faucet", fa=3.5, _uce=1.0, _t=1.0), faucet, rule)
    assert [w.floor for w in counts_of("peacocks bird", rule).words] == [0.5, 1.0]  # 0.2 < 0.5; bird's own
    said = describe([look_alike], [], [], faucet, rule, require_match=True, min_score=0)
    assert said["no_match"]["words"] == ["faucet"]
    assert said["no_match"]["reason"].startswith(
        "The images that hold faucet hold it too weakly to count as a"
    )
    assert "(a weight of 3 or more among the 1 best-scored images)" in said["no_match"]["reason"]
    plural = MatchRule(0.5, 0.5, word_floors={"peacock": WordFloor((3,), 3, 2.0)}, unseen_floors={3: 9.0})
    assert [w.floor for w in counts_of("peacocks", plural).words] == [2.0]


def test_a_singular_whose_pieces_the_plural_lacks_is_not_taken() -> None:
    """Only a singular whose calibrated pieces are among the plural's own: the index's statistics and
    a result's explanation cover the query's pieces only ("children" is one piece, "child" another)."""
    rule = MatchRule(0.5, 0.5, word_floors={"peacock": WordFloor((2,), 2, 2.0)})  # pieces outside it
    [word] = counts_of("peacocks", rule).words
    assert (word.needed, word.floor) == ((3,), 0.5)
    assert calibration_of("peacocks", (3, 4), rule) is None
    assert calibration_of("peacock", (3,), MatchRule(word_floors={"peacock": WordFloor((3,), 3, 1.0)}))


def test_singular_forms_are_rules_for_plurals_of_noun_phrases() -> None:
    assert singular_forms("berries") == ["berry", "berri", "berrie"]
    assert singular_forms("leaves") == ["leaf", "leafe", "leav", "leave"]
    assert singular_forms("buses") == ["bus", "buse"]
    assert singular_forms("Ducks") == ["duck"]
    assert singular_forms("skises") == ["skis", "skise"]
    assert singular_forms("glass") == singular_forms("bird") == singular_forms("is") == []
    assert is_number("twelve") and is_number("12") and not is_number("twin")


def test_a_calibrated_word_needs_the_pieces_its_model_writes_for_it() -> None:
    """A model that writes ``##uce`` and ``##t`` for faucets, never ``fa`` (calibrated): a faucet
    image without ``fa`` holds the word, the count is its pieces', and the key piece is weighed."""
    rule = MatchRule(0.5, 0.5, word_floors={"faucet": WordFloor((8, 9), 8, 1.0)})
    counts = counts_of("faucet", rule)
    assert [(w.word, w.images) for w in counts.words] == [("faucet", 3)]
    assert is_match(hit("faucet", _uce=1.5, _t=0.2), counts, rule)  # "fa" not needed; "##t" not weighed
    assert not is_match(hit("light", _uce=0.9, _t=3.0), counts, rule)  # the key under its floor
    assert not is_match(hit("fax", fa=4.0), counts, rule)
    uncalibrated = MatchRule(0.5, 0.5)  # every piece but a plural ending
    assert not is_match(hit("faucet", _uce=1.5, _t=0.2), counts_of("faucet", uncalibrated), uncalibrated)


def test_a_word_whose_pieces_no_image_holds_together_says_so_until_calibrated() -> None:
    """Images hold ``lo`` and ``##lli`` but none ``##pop``: not "No image has lollipop" (the index
    may well hold lollipops), and calibration that says the model writes only ``lo ##lli`` finds them."""
    rule = MatchRule(0.5, 0.5)
    counts = counts_of("lollipop clock", rule)
    assert [(w.word, w.images, w.partial) for w in counts.words] == [
        ("lollipop", 0, True),
        ("clock", 0, False),
    ]
    said = describe([hit("x", lo=3.0, _lli=2.0)], [], [], counts, rule, require_match=True, min_score=0)
    assert said["no_match"]["reason"] == (
        "No image holds every piece of lollipop (lo ##lli ##pop); `vsparta calibrate` learns which pieces "
        "the model writes for it. No image has clock."
    )
    assert [w["partial"] for w in said["query_word_stats"]] == [True, False]
    calibrated = MatchRule(0.5, 0.5, word_floors={"lollipop": WordFloor((10, 11), 11, 1.0)})
    counts = counts_of("lollipop", calibrated)
    assert [(w.word, w.images, w.partial) for w in counts.words] == [("lollipop", 40, False)]
    assert is_match(hit("x", lo=3.0, _lli=2.0), counts, calibrated)
