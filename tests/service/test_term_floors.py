"""A floor per word for the match rule (``service.term_floors``), calibrated by ``vsparta calibrate``
on captioned images in an index of their own, saved with the model and used by the service.

The corpus (``service_testdata``): "red" weighs 3.0 on the 3 red images, "blue" 3.5 on the 3 blue
ones; no image holds both.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient
from service_testdata import Corpus

from vsparta.cli import main
from vsparta.service.app import create_app
from vsparta.service.cli import setup_problem
from vsparta.service.matching import WordFloor
from vsparta.service.presence import Presence
from vsparta.service.settings import ServiceSettings
from vsparta.service.term_floors import (
    FILE,
    Calibration,
    FloorRule,
    caption_words,
    load,
    load_unseen,
    related_images,
    save,
    unseen_floors,
    word_floors,
)

# "peacock" (id 7): weighed 1-4 on the four images captions use it for, 0-0.5 on the four others;
# "cupcake" (cup 10 + ##cake 11): the model writes ##cake on its three positives, cup on none;
# "owl" (id 12): one positive.
CALIBRATION = Calibration(
    pieces={"peacock": (7,), "cupcake": (10, 11), "owl": (12,)},
    positive={
        "peacock": np.array([True] * 4 + [False] * 4),
        "cupcake": np.array([False] * 4 + [True] * 3 + [False]),
        "owl": np.array([True] + [False] * 7),
    },
    weights={
        7: np.array([1.0, 2.0, 3.0, 4.0, 0.0, 0.5, 0.2, 0.0]),
        10: np.array([0.0, 0, 0, 0, 0, 0, 0, 2.0]),
        11: np.array([0.0, 0, 0, 0, 3.0, 5.0, 4.0, 1.0]),
        12: np.array([5.0, 0, 0, 0, 0, 0, 0, 0]),
    },
)


def floor_of(rule: FloorRule, word: str = "peacock") -> float:
    return word_floors(CALIBRATION, rule)[word].floor


def test_a_floor_is_a_quantile_of_the_positives_raised_to_or_averaged_with_the_negatives() -> None:
    assert set(word_floors(CALIBRATION, FloorRule(0.0, None, "mid", 3))) == {"peacock", "cupcake"}  # owl: 1
    assert set(word_floors(CALIBRATION, FloorRule(0.5, None, "mid", 1))) == {"peacock", "cupcake", "owl"}
    assert floor_of(FloorRule(0.0, None, "mid", 3)) == 1.0
    assert floor_of(FloorRule(0.5, None, "mid", 3)) == 2.5
    assert floor_of(FloorRule(0.5, None, "mid", 1), "owl") == 5.0  # its one positive
    assert floor_of(FloorRule(0.0, 0.0, "max", 3)) == 1.0  # the negatives' largest: 0.5
    assert floor_of(FloorRule(0.0, 0.0, "mid", 3)) == 0.75


def test_a_word_needs_the_pieces_its_model_writes_on_its_positives() -> None:
    cupcake = word_floors(CALIBRATION, FloorRule(0.0, 0.0, "max", 3))["cupcake"]
    # never "cup"; ##cake's least positive 3.0 > 1.0; strong: its positives' 0.65 quantile (3, 4, 5),
    # reached by none of its 5 negatives (null rate smoothed: 0.5 / 6; counted on 5)
    main = replace(cupcake, presence=replace(cupcake.presence, more=()))  # the scan's weights: below
    assert main == WordFloor((11,), 11, 3.0, Presence(4.3, 0.5 / 6, negatives=5))
    assert word_floors(CALIBRATION, FloorRule(presence_quantile=None))["cupcake"].presence is None
    # the scan: every other quantile of (3, 4, 5) by numpy, none reached by a negative
    scan = [float(np.quantile([3.0, 4.0, 5.0], q)) for q in FloorRule().presence_scan]
    assert [w for w, _ in cupcake.presence.more] == pytest.approx(scan)
    assert {rate for _, rate in cupcake.presence.more} == {0.5 / 6}
    assert word_floors(CALIBRATION, FloorRule(presence_scan=()))["cupcake"].presence == Presence(
        4.3, 0.5 / 6, negatives=5
    )
    assert word_floors(CALIBRATION, FloorRule(piece_share=1.0))["cupcake"].pieces == (11,)  # on each
    never = Calibration({"x": (10, 12)}, {"x": np.array([True] * 3 + [False] * 5)}, CALIBRATION.weights)
    assert word_floors(never, FloorRule())["x"].pieces == (10, 12)  # written on no positive: all kept


def test_a_word_never_seen_takes_a_high_quantile_of_its_key_over_every_image() -> None:
    """The unseen floor of an id: the (1 - p) quantile of its weight over all 8 images, zeros
    included, as numpy computes it on the whole column (the table keeps only the weights above 0)."""
    written = {i: np.sort(w[w > 0]) for i, w in CALIBRATION.weights.items()}
    table = Calibration(CALIBRATION.pieces, CALIBRATION.positive, CALIBRATION.weights, written, 8)
    for p in (0.0, 0.001, 0.1, 0.3):
        got = unseen_floors(table, p)
        for i, column in CALIBRATION.weights.items():
            level = float(np.quantile(column, 1 - p))
            assert got.get(i, 0.0) == pytest.approx(level) and (i in got) == (level > 0)
    assert unseen_floors(table, 0.0) == {7: 4.0, 10: 2.0, 11: 5.0, 12: 5.0}
    assert 10 not in unseen_floors(table, 0.3)  # written on one image of eight: its 0.7 quantile is 0
    assert unseen_floors(table, None) == {} and unseen_floors(Calibration({}, {}, {}), 0.0) == {}


def test_images_named_by_an_alias_or_a_kind_of_the_word_are_no_look_alikes() -> None:
    """Captions say "clothing" (id 20) of two of the four lipstick images (id 21) and of no other;
    the model writes it on all four. With ``related_share`` the two lipsticks captions never call
    "clothing" are left out of its negatives: its null rate no longer counts them. "photo" (id 22),
    said of nearly every image, is no kind of anything, and nothing is a kind of it."""
    lipstick = np.array([True] * 4 + [False] * 6)
    clothing = np.array([True, True] + [False] * 8)
    photo = np.array([True] * 9 + [False])
    table = Calibration(
        pieces={"clothing": (20,), "lipstick": (21,), "photo": (22,)},
        positive={"clothing": clothing, "lipstick": lipstick, "photo": photo},
        weights={20: np.array([3.0] * 4 + [0.0] * 6), 21: lipstick * 3.0, 22: np.ones(10)},
    )
    named = related_images(table, 0.5, 2)
    assert named["clothing"].tolist() == lipstick.tolist() and "photo" not in named
    assert not (named["lipstick"] & ~lipstick).any()  # every image said "clothing" is a lipstick here
    one = FloorRule(min_positives=2, presence_scan=())  # one strong weight: the rates compared
    before = word_floors(table, one)["clothing"].presence
    after = word_floors(table, replace(one, related_share=0.5))["clothing"].presence
    assert before == Presence(3.0, 2.5 / 9, negatives=8) and after == Presence(3.0, 0.5 / 7, negatives=6)
    photo = Presence(1.0, 1.5 / 2, negatives=1)
    assert word_floors(table, replace(one, related_share=0.5))["photo"].presence == photo


def test_a_captions_words_are_its_merged_pieces(corpus: Corpus) -> None:
    tok = corpus.tokenizer
    words = caption_words(tok, ["Two peacocks next to a faucet.", "a red cube"])
    # peacocks = peacock ##s, faucet = fa ##uce ##t: the words the rule looks a floor up by; no "."
    assert {w.text for w in words} == {"two", "peacocks", "next", "to", "a", "faucet", "red", "cube"}
    assert next(w for w in words if w.text == "faucet").tokens == ("fa", "##uce", "##t")


def test_floors_are_saved_by_token_and_read_back_by_id(corpus: Corpus, tmp_path: Path) -> None:
    tok = corpus.tokenizer
    red, blue = tok.token_to_id("red"), tok.token_to_id("blue")
    table = {"red": WordFloor((red,), red, 1.5), "blues": WordFloor((blue,), blue, 1.75)}
    assert load(tmp_path, tok) == {}  # no file: no floors
    path = save(tmp_path, table, tok, FloorRule(), 12)
    body = json.loads(path.read_text())
    assert body["words"]["blues"] == {"pieces": ["blue"], "key": "blue", "floor": 1.75}
    assert body["calibration_images"] == 12 and body["format"] == 2
    assert load(tmp_path, tok) == table
    assert load(tmp_path / FILE, tok) == table  # a tokenizer.json-like file's folder
    tested = {"red": WordFloor((red,), red, 1.5, Presence(2.5, 0.125))}
    save(tmp_path, tested, tok, FloorRule(), 12)
    assert json.loads(path.read_text())["words"]["red"] == {
        "pieces": ["red"], "key": "red", "floor": 1.5, "strong": 2.5, "null_rate": 0.125
    }  # fmt: skip
    # no "negatives" (as calibrated before 2026-12-05): the rates count as counted on the file's 12
    # calibration images, not as exact
    old = {"red": WordFloor((red,), red, 1.5, Presence(2.5, 0.125, negatives=12))}
    assert load(tmp_path, tok) == old
    body_old = json.loads(path.read_text())
    del body_old["calibration_images"]
    path.write_text(json.dumps(body_old))
    assert load(tmp_path, tok) == tested  # nor that: the rates are taken as exact
    scanned = {"red": WordFloor((red,), red, 1.5, Presence(2.5, 0.125, ((3.5, 0.0625), (1.5, 0.25))))}
    save(tmp_path, scanned, tok, FloorRule(), 12)
    assert json.loads(path.read_text())["words"]["red"]["scan"] == [[3.5, 0.0625], [1.5, 0.25]]
    counted_on_12 = replace(scanned["red"].presence, negatives=12)  # the file's calibration images
    assert load(tmp_path, tok) == {"red": replace(scanned["red"], presence=counted_on_12)}
    counted = {"red": WordFloor((red,), red, 1.5, Presence(2.5, 0.125, negatives=63))}
    save(tmp_path, counted, tok, FloorRule(), 64)
    assert json.loads(path.read_text())["words"]["red"]["negatives"] == 63
    assert load(tmp_path, tok) == counted
    for wrong in (-1, 2.5, "many", True):
        body["words"] = {"red": {"pieces": ["red"], "key": "red", "floor": 1, "strong": 2, "null_rate": 0.1}}
        body["words"]["red"]["negatives"] = wrong
        path.write_text(json.dumps(body))
        with pytest.raises(ValueError, match="is not a count of images"):
            load(tmp_path, tok)
    body["words"] = {"red": {"pieces": ["red"], "key": "red", "floor": 1, "strong": 2, "null_rate": 0}}
    path.write_text(json.dumps(body))
    with pytest.raises(ValueError, match=r"null_rate 0.0 is not a share in \(0, 1\]"):
        load(tmp_path, tok)
    path.write_text(
        json.dumps({**body, "words": {"x": {"pieces": ["notawordpiece123"], "key": "x", "floor": 1}}})
    )
    with pytest.raises(ValueError, match="gives 'x' pieces the model's vocabulary lacks"):
        load(tmp_path, tok)
    path.write_text(json.dumps({**body, "words": {"red": {"pieces": ["red"], "key": "blue", "floor": 1}}}))
    with pytest.raises(ValueError, match="or a key not among them"):
        load(tmp_path, tok)
    path.write_text(json.dumps({"format": 1, "floors": {"red": 1.5}}))  # an earlier version's
    with pytest.raises(ValueError, match="format 1, this version reads 2: run `vsparta calibrate` again"):
        load(tmp_path, tok)


def test_unseen_floors_are_saved_by_token_and_read_back_by_id(corpus: Corpus, tmp_path: Path) -> None:
    tok = corpus.tokenizer
    red, cube = tok.token_to_id("red"), tok.token_to_id("cube")
    assert load_unseen(tmp_path, tok) == {}  # no file
    path = save(tmp_path, {}, tok, FloorRule(), 12, {cube: 4.0, red: 3.25})
    assert json.loads(path.read_text())["unseen"] == {"cube": 4.0, "red": 3.25}
    assert load_unseen(tmp_path, tok) == {cube: 4.0, red: 3.25}
    body = json.loads(path.read_text())
    path.write_text(json.dumps({k: v for k, v in body.items() if k != "unseen"}))  # calibrated before
    assert load_unseen(tmp_path, tok) == {} and load(tmp_path, tok) == {}
    path.write_text(json.dumps({**body, "unseen": {"notawordpiece123": 1.0}}))
    with pytest.raises(ValueError, match="unseen floors to tokens the model's vocabulary lacks: 'notaword"):
        load_unseen(tmp_path, tok)
    path.write_text(json.dumps({**body, "unseen": {"red": "high"}}))
    with pytest.raises(ValueError, match="is not a term-floors file this version reads"):
        load_unseen(tmp_path, tok)


def test_calibrate_writes_the_models_floors(calibrated: Path, corpus: Corpus) -> None:
    table = json.loads((calibrated / FILE).read_text())["words"]
    # "red": 3.0 on the 3 images captioned red, 0 on the 9 others: the mean of 3.0 and 0.0
    assert table["red"] == {
        "pieces": ["red"], "key": "red", "floor": pytest.approx(1.5),
        "strong": pytest.approx(3.0), "null_rate": pytest.approx(0.05),  # its presence test: 0.5 / 10
        "scan": [[pytest.approx(3.0), pytest.approx(0.05)]] * len(FloorRule().presence_scan),  # each 3.0
        "negatives": 9,  # the rates were counted on the 9 images not captioned red
    }  # fmt: skip
    assert table["blue"]["floor"] == pytest.approx(1.75)
    assert table["thing"]["floor"] == pytest.approx(0.0) and "cube" not in table  # no caption says "cube"
    # every token the model writes on the 12 images, at its (1 - 0.001) quantile: all but the largest
    # weight's 1 % of a step: "cube" 4.0 on 4 images, "red" 3.0 on 3, "object" 0.5 on all
    unseen = json.loads((calibrated / FILE).read_text())["unseen"]
    assert unseen["cube"] == pytest.approx(4.0) and unseen["red"] == pytest.approx(3.0)
    assert unseen["object"] == pytest.approx(0.5) and "purple" not in unseen


def test_the_service_holds_each_word_to_its_own_floor(
    calibrated: Path, embedded_spec: str, make_settings: Callable[..., ServiceSettings]
) -> None:
    red = calibrated / FILE
    body = json.loads(red.read_text())
    body["words"]["red"]["floor"] = 3.2  # above red's 3.0 on every red image; blue keeps 1.75
    for entry in body["words"].values():  # no presence test (as a file calibrated before there was one)
        del entry["strong"], entry["null_rate"]  # (tests/service/test_service_presence.py tests it)
    red.write_text(json.dumps(body))
    for floors_on, expect_red in ((True, []), (False, ["red-cube", "red-sphere", "red-cylinder"])):
        settings = make_settings(embedded_spec, model_path=calibrated, match_term_floors=floors_on)
        with TestClient(create_app(settings), raise_server_exceptions=False) as c:
            assert c.get("/ready").json()["term_floors"] == (len(body["words"]) if floors_on else 0)
            r = c.post("/search", json={"query": "red", "k": 5}).json()
            assert sorted(x["id"] for x in r["results"]) == sorted(expect_red)
            if not floors_on:
                continue
            assert r["no_match"]["words"] == ["red"]
            assert "a weight of 3.2 or more" in r["no_match"]["reason"]
            both = c.post("/search", json={"query": "red blue", "k": 5}).json()
            assert {x["id"].split("-")[0] for x in both["results"]} == {"blue"}


def test_a_word_the_calibration_never_saw_needs_its_unseen_floor(
    calibrated: Path, embedded_spec: str, make_settings: Callable[..., ServiceSettings]
) -> None:
    """No calibration caption says "cube" (4.0 on the cubes): its unseen floor, raised here to 4.1,
    leaves them out, says why, and adds up in the explanation; ``match_unseen_floors`` off keeps the
    rule's one floor."""
    path = calibrated / FILE
    body = json.loads(path.read_text())
    body["unseen"]["cube"] = 4.1
    for entry in body["words"].values():  # red's presence test would fail on 3 images of 12
        del entry["strong"], entry["null_rate"]
    path.write_text(json.dumps(body))
    for unseen_on, expect in ((True, []), (False, ["blue-cube", "green-cube", "red-cube"])):
        settings = make_settings(embedded_spec, model_path=calibrated, match_unseen_floors=unseen_on)
        with TestClient(create_app(settings), raise_server_exceptions=False) as c:
            r = c.post("/search", json={"query": "cube", "k": 3}).json()
            assert sorted(x["id"] for x in r["results"]) == expect
            if unseen_on:
                assert r["no_match"]["words"] == ["cube"]
                assert "a weight of 4.1 or more" in r["no_match"]["reason"]
                red = c.post("/search", json={"query": "red cube", "k": 3}).json()  # red matches, cube ranks
                assert [x["id"] for x in red["results"]] == ["red-cube", "red-cylinder", "red-sphere"]


def test_calibrate_names_the_images_the_index_lacks(corpus: Corpus, embedded_spec: str, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    manifest = tmp_path / "m.jsonl"
    record = {"id": "not-indexed", "image": "x.png", "captions": ["a red cube"]}
    manifest.write_text(json.dumps(record) + "\n")
    argv = ["calibrate", str(manifest), "--model", str(corpus.model_dir), "--index", embedded_spec]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("vsparta calibrate: error: 1 of the 1 calibration images are not in the index")
    assert "'not-indexed'" in err and len(err.splitlines()) == 1
    assert not (corpus.model_dir / FILE).exists()


def test_a_floors_file_the_service_cannot_read_is_one_sentence(
    calibrated: Path, embedded_spec: str, capsys: pytest.CaptureFixture[str]
) -> None:
    (calibrated / FILE).write_text('{"format": 1, "floors": {"red": "high"}}')
    assert main(["search", "red", "--backend", embedded_spec, "--model", str(calibrated)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("vsparta search: error: ") and "is not a term-floors file" in err
    assert len(err.splitlines()) == 1


def test_a_served_model_with_a_broken_floors_file_is_not_ready_and_says_why(
    calibrated: Path, corpus: Corpus, embedded_spec: str
) -> None:
    settings = ServiceSettings(
        backend=embedded_spec,
        model_path=calibrated,
        image_roots=[corpus.image_root],
        setup_errors="not-ready",
    )
    assert setup_problem(argparse.Namespace(), settings) is None
    (calibrated / FILE).write_text("not json")
    problem = setup_problem(argparse.Namespace(), settings)
    assert problem and "is not a term-floors file" in problem and "VSPARTA_MATCH_TERM_FLOORS" in problem
    assert (
        setup_problem(argparse.Namespace(), settings.model_copy(update={"match_term_floors": False})) is None
    )
