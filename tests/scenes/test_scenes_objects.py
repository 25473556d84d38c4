"""The object scenes: real emoji pictures, names from the libraries, honest held-out splits."""

from __future__ import annotations

import argparse
import json
import os
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from vsparta.cli import main
from vsparta.core.manifest import ManifestRecord, read_manifest
from vsparta.demo import _scenes_argv
from vsparta.scenes import objects
from vsparta.scenes.emoji_catalog import FONT_ENV, FONT_PACKAGE, catalog, glyph, normalise, select
from vsparta.scenes.object_captions import CAPTIONS_PER_IMAGE, template_words
from vsparta.scenes.object_render import MAX_OBJECTS
from vsparta.scenes.object_words import NUMBER_WORDS, choose_vocabulary, counted, plural
from vsparta.scenes.objects import SPLITS, generate_object_scenes

COUNTS = {"train": 40, "val": 8, "test": 12, "heldout_words": 15, "heldout_objects": 15, "shift": 12}
ARGS = {"image_size": 48, "seed": 3, "min_objects": 1, "max_objects": 5}
# the demo's 2,000 training scenes show 1,092 of the 1,161 objects, half of them in 3 or more
DEMO_SHOWN, DEMO_MEDIAN_APPEARANCES = 0.93, 3


@pytest.fixture(scope="module")
def scenes_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("objects")
    generate_object_scenes(out, COUNTS, progress=False, **ARGS)
    return out


@pytest.fixture(scope="module")
def records(scenes_dir: Path) -> dict[str, list[ManifestRecord]]:
    return {split: read_manifest(scenes_dir / f"{split}.jsonl") for split in SPLITS}


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9']+", text))


def test_catalog_is_about_1200_distinct_named_pictures() -> None:
    objects = catalog()
    assert 1000 <= len(objects) <= 1400
    assert len({o.char for o in objects}) == len(objects) == len({o.name for o in objects})
    by_name = {o.name: o for o in objects}
    assert "car" in by_name["automobile"].aliases  # the emoji package's alias, not a typed list
    assert by_name["dog"].categories == ("animal", "mammal")  # from Unicode's subgroup animal-mammal
    assert all(o.categories and re.fullmatch(r"[a-z0-9' ]+", o.name) for o in objects)
    assert glyph(by_name["pizza"].char).mode == "RGBA" and min(glyph(by_name["pizza"].char).size) > 50


def test_words_and_plurals() -> None:
    assert normalise(":red_apple:") == "red apple" and normalise(":dog2:") == "dog"
    assert [plural(w) for w in ("dog", "bus", "cherry", "mouse", "sheep")] == [
        "dogs", "buses", "cherries", "mice", "sheep",
    ]  # fmt: skip
    assert counted("apple", 1) == "an apple" and counted("hot dog", 3) == "three hot dogs"


def test_splits_are_real_images_with_five_captions(records: dict[str, list[ManifestRecord]]) -> None:
    for split, n in COUNTS.items():
        assert len(records[split]) == n
        for record in records[split]:
            with Image.open(record.image) as img:
                assert img.size == (48, 48) and img.mode == "RGB"
                assert np.asarray(img).std() > 5  # not a blank canvas
            assert len(record.captions) == CAPTIONS_PER_IMAGE == len(set(record.captions))
            objects = record.metadata["objects"]
            assert 1 <= len(objects) <= 5 and all(0.0 <= o["hidden"] <= 1.0 for o in objects)


def test_captions_say_the_counts(records: dict[str, list[ManifestRecord]]) -> None:
    """A number word in a caption never exceeds the copies of any object in the image."""
    for record in records["train"]:
        most = max(
            sum(o["name"] == name for o in record.metadata["objects"])
            for name in {o["name"] for o in record.metadata["objects"]}
        )
        for caption in record.captions:
            said = [n for n, w in NUMBER_WORDS.items() if w in _words(caption)]
            assert all(n <= most for n in said), (caption, record.metadata["objects"])


def test_some_objects_are_partly_hidden(records: dict[str, list[ManifestRecord]]) -> None:
    hidden = [o["hidden"] for r in records["train"] for o in r.metadata["objects"]]
    assert any(0.05 < h < 1.0 for h in hidden)


def test_held_out_words_never_reach_the_seen_splits(records: dict[str, list[ManifestRecord]]) -> None:
    vocab = choose_vocabulary(catalog(), ARGS["seed"], template_words())
    assert len(vocab.held_words) >= 50 and not vocab.held_words & template_words()
    for split in ("train", "val", "test"):
        for record in records[split]:
            for caption in record.captions:
                assert not _words(caption) & vocab.held_forms, (split, caption)
    for record in records["heldout_words"]:
        assert all(_words(c) & vocab.held_forms for c in record.captions), record.captions


def test_held_out_objects_are_never_seen(records: dict[str, list[ManifestRecord]]) -> None:
    vocab = choose_vocabulary(catalog(), ARGS["seed"], template_words())
    unseen = {catalog()[i].name for i in vocab.unseen}
    for split in ("train", "val", "test", "heldout_words"):
        assert not {o["name"] for r in records[split] for o in r.metadata["objects"]} & unseen
    for record in records["heldout_objects"]:
        assert record.metadata["focus"] in unseen
        assert record.metadata["focus"] in {o["name"] for o in record.metadata["objects"]}


def test_same_seed_same_bytes(scenes_dir: Path, tmp_path: Path) -> None:
    again = tmp_path / "again"
    generate_object_scenes(again, {"train": 6, "heldout_words": 3}, progress=False, **ARGS)
    for split in ("train", "heldout_words"):
        first = (scenes_dir / f"{split}.jsonl").read_text().splitlines()[: 6 if split == "train" else 3]
        second = (again / f"{split}.jsonl").read_text().splitlines()
        assert [json.loads(a)["captions"] for a in first] == [json.loads(b)["captions"] for b in second]
        for a in first:
            name = Path(json.loads(a)["image"]).name
            assert (scenes_dir / "images" / split / name).read_bytes() == (
                again / "images" / split / name
            ).read_bytes()


def test_worker_processes_draw_the_same_bytes(
    scenes_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Split into chunks of 7 over two processes, each scene still comes from its own generator."""
    monkeypatch.setattr(objects, "CHUNK", 7)
    again = tmp_path / "workers"
    generate_object_scenes(again, {"train": 40, "shift": 12}, progress=False, workers=2, **ARGS)
    for split in ("train", "shift"):
        first = read_manifest(scenes_dir / f"{split}.jsonl")
        second = read_manifest(again / f"{split}.jsonl")
        assert [r.id for r in second] == [r.id for r in first]
        assert [(r.captions, r.metadata) for r in second] == [(r.captions, r.metadata) for r in first]
        for a, b in zip(first, second, strict=True):
            assert Path(b.image).read_bytes() == Path(a.image).read_bytes()


def test_scene_workers_default_to_the_cores_for_large_splits() -> None:
    assert objects.scene_workers(objects.CHUNK, None) == 1  # small: no process to start
    assert objects.scene_workers(100 * objects.CHUNK, None) == (os.cpu_count() or 1)
    assert objects.scene_workers(10, 3) == 3
    with pytest.raises(ValueError, match="scene workers must be >= 1"):
        objects.scene_workers(10, 0)


def test_cli_writes_the_vocabulary_report(tmp_path: Path) -> None:
    out = tmp_path / "s"
    argv = ["scenes", "--kind", "objects", "--out", str(out), "--train", "30", "--val", "5", "--test", "5"]
    argv += ["--heldout-words", "5", "--heldout-objects", "5", "--shift", "5"]
    argv += ["--size", "32", "--no-progress", "--workers", "2"]
    assert main(argv) == 0
    report = json.loads((out / "vocabulary.json").read_text())
    assert set(report) == {*SPLITS, "all"}
    total = report["all"]
    assert total["images"] == 55 and total["distinct_word_pieces"] > 100
    assert not [piece for piece, _ in total["top"] if piece.startswith("[")]  # no [PAD], [CLS] ...
    assert len(total["df_ranked"]) == total["distinct_word_pieces"]
    curve = [total["df_curve"][r] for r in ("1", "10", "100")]
    assert curve == sorted(curve, reverse=True) and curve[0] > curve[2]


def test_workers_below_one_are_refused_by_the_parser(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["scenes", "--kind", "objects", "--out", str(tmp_path / "w"), "--workers", "0"])
    assert exc.value.code == 2
    assert "--workers: must be >= 1, got 0" in capsys.readouterr().err
    assert not (tmp_path / "w").exists()


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--min-objects", "0"], "at least 1 object"),
        (["--max-objects", str(MAX_OBJECTS + 1)], f"at most {MAX_OBJECTS} objects fit"),
        (["--min-objects", "4", "--max-objects", "2"], "below --min-objects"),
    ],
)
def test_impossible_numbers_one_sentence_exit_2(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    extra: list[str],
    needle: str,
) -> None:
    argv = ["scenes", "--kind", "objects", "--out", str(tmp_path / "x"), "--train", "2", *extra]
    assert main(argv) == 2
    assert needle in caplog.text and "Traceback" not in capsys.readouterr().err
    assert not (tmp_path / "x" / "train.jsonl").exists()


def test_missing_font_names_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(FONT_ENV, str(tmp_path / "no-such-font.ttf"))
    catalog.cache_clear()
    try:
        assert main(["scenes", "--kind", "objects", "--out", str(tmp_path / "x"), "--train", "2"]) == 2
    finally:
        catalog.cache_clear()
    assert f"apt-get install {FONT_PACKAGE}" in caplog.text


@pytest.mark.slow
def test_a_full_size_benchmark_has_over_1000_word_pieces(tmp_path: Path) -> None:
    out = tmp_path / "s"
    argv = ["scenes", "--kind", "objects", "--out", str(out), "--train", "2000", "--val", "0", "--test", "0"]
    argv += ["--heldout-words", "0", "--heldout-objects", "0", "--size", "32", "--no-progress"]
    assert main(argv) == 0
    assert json.loads((out / "vocabulary.json").read_text())["all"]["distinct_word_pieces"] >= 1000


def test_groups_restrict_the_catalog_to_unicode_subgroups(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    fruit = select(("food-fruit",))
    assert "banana" in {o.name for o in fruit} and {o.subgroup for o in fruit} == {"food-fruit"}
    assert {o.group for o in select(("Food & Drink",))} == {"Food & Drink"}
    assert select(()) == catalog()
    argv = [
        "scenes",
        "--kind",
        "objects",
        "--out",
        str(tmp_path / "x"),
        "--train",
        "2",
        "--groups",
        "food-fruitt",
    ]
    assert main(argv) == 2
    assert "unknown emoji group/subgroup 'food-fruitt'" in caplog.text
    assert "Traceback" not in capsys.readouterr().err and not (tmp_path / "x" / "train.jsonl").exists()


@pytest.mark.slow
def test_the_demo_data_show_almost_every_object_of_the_catalog(tmp_path: Path) -> None:
    """The demo learns the catalog, not a slice of it: its training scenes show nearly every object,
    most of them several times (the pretrained stem learns an object from a few scenes)."""
    from vsparta.demo import add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--out", str(tmp_path), "--no-progress"])
    argv = _scenes_argv(args, tmp_path / "scenes")
    assert "--groups" not in argv and main(argv) == 0
    catalog_names = {o.name for o in select(())}
    seen: Counter[str] = Counter()
    for record in read_manifest(tmp_path / "scenes" / "train.jsonl"):
        seen.update({o["name"] for o in record.metadata["objects"]})
    assert set(seen) <= catalog_names and len(seen) >= DEMO_SHOWN * len(catalog_names)
    assert sorted(seen.values())[len(seen) // 2] >= DEMO_MEDIAN_APPEARANCES, seen.most_common()[-5:]
