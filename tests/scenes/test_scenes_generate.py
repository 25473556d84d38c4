"""The generated benchmark: deterministic, real image files, truthful captions, hard negatives."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from vsparta.cli import main
from vsparta.core.images import load_image
from vsparta.core.manifest import ManifestRecord, read_manifest
from vsparta.model.metrics import recall_at_k
from vsparta.scenes.shape_captions import COLOUR_WORDS, PLURALS, SHAPE_WORDS
from vsparta.scenes.shape_objects import COLOURS, POSITIONS, SHAPES
from vsparta.scenes.shape_oracle import ATTRIBUTES, SceneIndex, oracle_scores, parse_caption
from vsparta.scenes.shapes import generate_scenes

ARGS = {"n_train": 30, "n_val": 10, "n_test": 120, "image_size": 64, "seed": 0}


@pytest.fixture(scope="module")
def scenes_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("scenes")
    generate_scenes(out, **ARGS)
    return out


@pytest.fixture(scope="module")
def test_records(scenes_dir: Path) -> list[ManifestRecord]:
    return read_manifest(scenes_dir / "test.jsonl")


def _all_files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_same_seed_same_bytes_other_seed_differs(scenes_dir: Path, tmp_path: Path) -> None:
    again = tmp_path / "again"
    manifests = generate_scenes(again, **ARGS)
    assert manifests == {s: again / f"{s}.jsonl" for s in ("train", "val", "test")}
    first, second = _all_files(scenes_dir), _all_files(again)
    assert first.keys() == second.keys() and len(first) == 3 + 160
    assert all(first[k] == second[k] for k in first)

    other = tmp_path / "other"
    generate_scenes(other, **{**ARGS, "seed": 1})
    third = _all_files(other)
    assert third["test.jsonl"] != first["test.jsonl"]
    shared = [k for k in third.keys() & first.keys() if k.startswith("images/")]
    assert sum(third[k] != first[k] for k in shared) == len(shared)


def test_manifests_and_files_are_real(scenes_dir: Path) -> None:
    counts = {"train": 30, "val": 10, "test": 120}
    ids: set[str] = set()
    formats = Counter()
    for split, n in counts.items():
        text = (scenes_dir / f"{split}.jsonl").read_text()
        assert all(json.loads(line)["image"].startswith(f"images/{split}/") for line in text.splitlines())
        records = read_manifest(scenes_dir / f"{split}.jsonl")
        assert len(records) == n
        for r in records:
            ids.add(r.id)
            assert r.image.is_file() and r.image.parent == (scenes_dir / "images" / split).resolve()
            assert len(r.captions) == 5 and len(set(r.captions)) == 5
            meta = r.metadata
            assert meta["split"] == split and 2 <= len(meta["objects"]) <= 4
            for o in meta["objects"]:
                assert o["shape"] in SHAPES and o["colour"] in COLOURS
                assert o["size"] in ("small", "large") and o["position"] in POSITIONS
                x1, y1, x2, y2 = o["box"]
                assert 0 <= x1 < x2 <= 64 and 0 <= y1 < y2 <= 64
            with Image.open(r.image) as raw:
                assert raw.format == {"png": "PNG", "jpg": "JPEG"}[meta["format"]]
                assert r.image.suffix == f".{meta['format']}"
            rgb = load_image(r.image)
            assert rgb.size == (64, 64) and np.asarray(rgb).std() > 5  # not a flat picture
            formats[meta["format"]] += 1
    assert len(ids) == 160
    assert formats["png"] > 20 and formats["jpg"] > 20  # a real mix of both


def test_enough_variety(test_records: list[ManifestRecord]) -> None:
    objs = [o for r in test_records for o in r.metadata["objects"]]
    assert {o["shape"] for o in objs} == set(SHAPES)
    assert len({o["colour"] for o in objs}) >= 8
    assert {o["position"] for o in objs} == set(POSITIONS)
    assert {len(r.metadata["objects"]) for r in test_records} == {2, 3, 4}
    assert len({r.metadata["background"]["texture"] for r in test_records}) == 4
    rels = {x["relation"] for r in test_records for x in r.metadata["relations"]}
    assert rels >= {"left of", "right of", "above", "below", "next to", "larger than", "smaller than"}
    captions = [c for r in test_records for c in r.captions]
    assert len(set(captions)) > 0.95 * len(captions)


_SHAPE_TOKENS = {w: s for s, ws in SHAPE_WORDS.items() for w in ws} | {
    PLURALS[w]: s for s, ws in SHAPE_WORDS.items() for w in ws
}
_COLOUR_TOKENS = {w: c for c, ws in COLOUR_WORDS.items() for w in ws}


def test_captions_name_only_what_is_in_the_image(test_records: list[ManifestRecord]) -> None:
    for r in test_records:
        shapes = {o["shape"] for o in r.metadata["objects"]}
        colours = {o["colour"] for o in r.metadata["objects"]}
        for caption in r.captions:
            tokens = re.findall(r"[a-z]+", caption.lower())
            named_shapes = {_SHAPE_TOKENS[t] for t in tokens if t in _SHAPE_TOKENS}
            named_colours = {_COLOUR_TOKENS[t] for t in tokens if t in _COLOUR_TOKENS}
            assert named_shapes | named_colours, caption
            assert named_shapes <= shapes, (caption, r.metadata["objects"])
            assert named_colours <= colours, (caption, r.metadata["objects"])


def test_captions_are_true_including_positions_and_relations(test_records: list[ManifestRecord]) -> None:
    kinds = Counter()
    for r in test_records:
        index = SceneIndex(r.metadata)
        for caption in r.captions:
            parsed = parse_caption(caption)
            ok, total = index.check(parsed, ATTRIBUTES)
            assert total > 0 and ok == total, (caption, parsed, r.metadata["objects"])
            kinds["relation"] += bool(parsed.relations)
            kinds["position"] += any(m.position for m in parsed.mentions)
            kinds["colour_only"] += bool(parsed.colours) and not parsed.mentions
            kinds["shape_only"] += bool(parsed.mentions) and not any(m.colour for m in parsed.mentions)
    assert min(kinds.values()) >= 20, kinds  # every kind of caption is common


def test_relations_agree_with_pixels(test_records: list[ManifestRecord]) -> None:
    for r in test_records:
        objs = r.metadata["objects"]
        for rel in r.metadata["relations"]:
            a, b = objs[rel["subject"]], objs[rel["object"]]
            (ax, ay), (bx, by) = a["center"], b["center"]
            area = {
                k: (o["box"][2] - o["box"][0]) * (o["box"][3] - o["box"][1]) for k, o in (("a", a), ("b", b))
            }
            check = {
                "left of": ax < bx,
                "right of": ax > bx,
                "above": ay < by,
                "below": ay > by,
                "next to": np.hypot(ax - bx, ay - by) < 0.45 * 64,
                "larger than": area["a"] > area["b"],
                "smaller than": area["a"] < area["b"],
            }[rel["relation"]]
            assert check, (rel, a, b)


def _multiset(objs: list[dict], keys: tuple[str, ...]) -> Counter:
    return Counter(tuple(o[k] for k in keys) for o in objs)


def _named_relations(meta: dict) -> set[tuple]:
    objs = meta["objects"]

    def name(k: int) -> tuple[str, str]:
        return (objs[k]["shape"], objs[k]["colour"])

    return {(name(x["subject"]), x["relation"], name(x["object"])) for x in meta["relations"]}


def test_hard_negative_pairs_exist(test_records: list[ManifestRecord]) -> None:
    by_id = {r.id: r for r in test_records}
    found = Counter()
    for r in test_records:
        meta = r.metadata
        if meta["variant"] == "base":
            assert meta["variant_of"] is None
            continue
        base = by_id[meta["variant_of"]]
        assert base.metadata["group"] == meta["group"] and base.metadata["variant"] == "base"
        v, b = meta["objects"], base.metadata["objects"]
        same_shapes = _multiset(v, ("shape",)) == _multiset(b, ("shape",))
        assert same_shapes  # a bag-of-shapes model cannot tell any variant from its base
        kind = meta["variant"]
        if kind == "colour_swap":
            assert _multiset(v, ("colour",)) == _multiset(b, ("colour",))
            assert _multiset(v, ("shape", "colour")) != _multiset(b, ("shape", "colour"))
            assert _multiset(v, ("shape", "size", "position")) == _multiset(b, ("shape", "size", "position"))
        elif kind in ("position_swap", "mirror"):
            assert _multiset(v, ("shape", "colour", "size")) == _multiset(b, ("shape", "colour", "size"))
            assert _multiset(v, ("shape", "colour", "position")) != _multiset(
                b, ("shape", "colour", "position")
            )
            assert _named_relations(meta) != _named_relations(base.metadata)  # same objects, new relations
        elif kind == "size_swap":
            assert _multiset(v, ("shape", "colour", "position")) == _multiset(
                b, ("shape", "colour", "position")
            )
            assert _multiset(v, ("shape", "colour", "size")) != _multiset(b, ("shape", "colour", "size"))
        else:
            pytest.fail(f"unknown variant {kind}")
        found[kind] += 1
    assert set(found) == {"colour_swap", "position_swap", "mirror", "size_swap"}
    assert sum(found.values()) > 0.4 * len(test_records), found


def test_ignoring_colour_position_or_relations_loses_recall(test_records: list[ManifestRecord]) -> None:
    """Symbolic matchers over metadata: each attribute a matcher ignores costs it recall."""
    captions = [c for r in test_records for c in r.captions]
    positive = np.repeat(np.arange(len(test_records)), 5)
    meta = [r.metadata for r in test_records]
    recall = {
        name: recall_at_k(oracle_scores(captions, meta, use), positive)
        for name, use in {
            "shapes": ("shape",),
            "shapes+colours": ("shape", "colour"),
            "no_relations": ("shape", "colour", "size", "position"),
            "full": ATTRIBUTES,
        }.items()
    }
    assert recall["full"]["R@1"] > recall["shapes"]["R@1"] + 25, recall
    assert recall["full"]["R@5"] > recall["shapes"]["R@5"] + 30, recall
    assert recall["shapes+colours"]["R@1"] < recall["no_relations"]["R@1"] - 10, recall
    assert recall["no_relations"]["R@1"] < recall["full"]["R@1"], recall


def test_bad_arguments_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="n_train"):
        generate_scenes(tmp_path, n_train=-1)
    with pytest.raises(ValueError, match="image_size"):
        generate_scenes(tmp_path, image_size=8)
    with pytest.raises(ValueError, match="seed"):
        generate_scenes(tmp_path, seed=-3)
    assert not any(tmp_path.iterdir())  # nothing written before validation


def test_cli_writes_the_benchmark(tmp_path: Path) -> None:
    out = tmp_path / "bench"
    argv = [
        "scenes",
        "--out",
        str(out),
        "--train",
        "6",
        "--val",
        "2",
        "--test",
        "4",
        "--size",
        "48",
        "--seed",
        "5",
    ]
    assert main(argv) == 0
    for split, n in (("train", 6), ("val", 2), ("test", 4)):
        records = read_manifest(out / f"{split}.jsonl")
        assert len(records) == n and all(load_image(r.image).size == (48, 48) for r in records)
    same = tmp_path / "same"
    generate_scenes(same, n_train=6, n_val=2, n_test=4, image_size=48, seed=5)
    assert (same / "test.jsonl").read_bytes() != b"" and _all_files(same) == _all_files(out)
    assert main(["scenes", "--out", str(tmp_path / "bad"), "--size", "8"]) == 2
