"""The shift split: the seen objects and words, drawn and captioned as no other split is; and the
ambiguity ceiling, R@1 of a perfect object detector, that every pool is reported with."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from vsparta.core.manifest import ManifestRecord, read_manifest
from vsparta.scenes.object_captions import SHIFT_RELATION, SHIFT_TEMPLATES
from vsparta.scenes.object_ceiling import perfect_detector_recall
from vsparta.scenes.object_render import SEEN
from vsparta.scenes.object_shift import SHIFT
from vsparta.scenes.objects import generate_object_scenes, held_out

COUNTS = {"train": 60, "test": 20, "shift": 40}


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[ManifestRecord]]:
    out = tmp_path_factory.mktemp("shift")
    manifests = generate_object_scenes(out, COUNTS, image_size=64, seed=5, progress=False)
    return {split: read_manifest(path) for split, path in manifests.items()}


def _frames() -> list[re.Pattern[str]]:
    """Each shift frame as a pattern: its fixed words around any object phrase."""
    frames = ["^" + ".+".join(re.escape(part) for part in t.split("{}")) + "$" for t in SHIFT_TEMPLATES]
    relation = "(left of|right of|above|below|next to)"
    frames.append("^" + SHIFT_RELATION.format(".+", relation, ".+") + "$")
    return [re.compile(f) for f in frames]


def test_shift_scenes_show_seen_objects_in_another_style(records) -> None:
    objects, vocab = held_out(5)
    seen = {objects[i].name for i in vocab.seen}
    for record in records["shift"]:
        meta = record.metadata
        assert meta["style"] == "shift" and meta["background"]["texture"] in {"gradient", "noise"}
        assert {o["name"] for o in meta["objects"]} <= seen
        assert len(meta["mentions"]) == len(record.captions) == 5
    for record in records["train"] + records["test"]:
        assert record.metadata["style"] == "seen"
        assert record.metadata["background"]["texture"] in {"stripes", "checks", "blotches", "speckles"}


def test_shift_captions_use_frames_no_other_split_uses(records) -> None:
    frames = _frames()
    for record in records["shift"]:
        assert all(any(f.match(c) for f in frames) for c in record.captions), record.captions
    for record in records["train"] + records["test"]:
        assert not any(f.match(c) for c in record.captions for f in frames)
    words = {w for r in records["shift"] for c in r.captions for w in c.split()}
    assert not words & set(held_out(5)[1].held_words)  # seen words only


def test_shift_sizes_and_angles_lie_outside_the_training_ranges() -> None:
    rng = np.random.default_rng(0)
    for word in ("small", "large"):
        seen = [SEEN.side(rng, word, 1.0) for _ in range(2000)]
        shift = [SHIFT.side(rng, word, 1.0) for _ in range(2000)]
        assert max(shift) < min(seen) if word == "small" else min(shift) > max(seen)
    seen_angles = np.abs([SEEN.angle(rng) for _ in range(2000)])
    shift_angles = np.abs([SHIFT.angle(rng) for _ in range(2000)])
    assert shift_angles.min() > seen_angles.max()


def _record(i: int, objects: dict[str, int], mentions: list[dict[str, int]]) -> ManifestRecord:
    shown = [{"name": n} for n, c in objects.items() for _ in range(c)]
    named = [[{"name": n, "count": c} for n, c in m.items()] for m in mentions]
    return ManifestRecord(
        f"i{i}", Path(f"i{i}.jpg"), ["c"] * len(mentions), {"objects": shown, "mentions": named}
    )


def test_the_perfect_detector_ranks_exact_matches_first() -> None:
    pool = [
        _record(0, {"dog": 2}, [{"dog": 2}]),  # exact; image 1 shows two dogs too: 1/2
        _record(1, {"dog": 2}, [{"dog": 2}]),  # 1/2
        _record(2, {"dog": 1, "cat": 1}, [{"cat": 1}]),  # no image shows a cat alone; two show one: 1/2
        _record(3, {"cat": 1, "pizza": 1}, [{"cat": 1, "pizza": 1}, {"pizza": 1}]),  # 1, then see below
        _record(4, {"pizza": 1}, [{"pizza": 1}]),  # exact and alone: 1
    ]
    # image 3's "pizza" caption: image 4 shows exactly one pizza and nothing else, so 0
    expected = np.mean([0.5, 0.5, 0.5, 1.0, 0.0, 1.0]) * 100
    assert perfect_detector_recall(pool) == pytest.approx(expected)
    assert perfect_detector_recall([ManifestRecord("x", Path("x.jpg"), ["c"], {"objects": []})]) is None


def test_real_pools_have_a_high_ceiling(records) -> None:
    for split in ("test", "shift"):
        ceiling = perfect_detector_recall(records[split])
        assert ceiling is not None and 50 < ceiling <= 100
