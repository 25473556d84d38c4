"""`vsparta bench quality` end to end on a tiny config: scenes -> both trainings -> eval rows -> docs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import LITE, TINY


@pytest.mark.slow
def test_quality_bench_writes_rows_for_every_cut(tmp_path: Path) -> None:
    from vsparta.cli import main

    out = tmp_path / "docs"
    code = main(
        ["bench", "quality", "--quick", "--train", "48", "--val", "16", "--test", "16", "--size", "32",
         "--epochs", "1", "--batch-size", "16", "--lrs", "3e-3", "--dense-lrs", "1e-3",
         "--weights", "0,1e-2", "--config", json.dumps(TINY), "--threads", "2",
         "--cache-dir", str(tmp_path / "cache"), "--out-dir", str(out)]
    )  # fmt: skip
    assert code == 0
    data = json.loads((out / "quality.json").read_text())
    names = [r["variant"] for r in data["results"]]
    assert names == ["VisualSparta (paper recipe)", "VisualSparta (flops 0.01)", "dense"]
    for res in data["results"][:2]:
        cuts = [row["top_n"] for row in res["rows"]]
        assert cuts == [50, 100, 300, 1000, "natural", "all"]
        terms = {row["top_n"]: row["terms_per_image"] for row in res["rows"]}
        positive = res["rows"][0]["positive_terms_per_image"]
        assert terms["all"] == pytest.approx(positive)
        assert terms["natural"] == pytest.approx(min(positive, 1000), rel=0.01)
        assert terms[50] <= 50 and terms[100] <= 100
        assert all(0 <= row["recall"]["16"]["R@1"] <= 100 for row in res["rows"])
    paper, sparse = (r["rows"][0]["positive_terms_per_image"] for r in data["results"][:2])
    assert sparse < paper  # the regularizer switched terms off
    assert data["results"][2]["rows"][0]["model"] == "dense"
    md = (out / "quality.md").read_text()
    assert "| natural |" in md and "vsparta bench quality" in md
    assert (out / "quality.png").stat().st_size > 1000


@pytest.mark.slow
def test_quality_bench_on_object_scenes_reports_held_out_splits_and_merges(tmp_path: Path) -> None:
    from vsparta.cli import main

    common = ["bench", "quality", "--quick", "--kind", "objects", "--train", "40", "--val", "12"]
    common += ["--test", "12", "--heldout", "10", "--size", "32", "--epochs", "1", "--batch-size", "16"]
    common += ["--config", json.dumps(TINY), "--threads", "2", "--cache-dir", str(tmp_path / "cache")]
    sparta, dense = tmp_path / "sparta", tmp_path / "dense"
    assert main([*common, "--weights", "3e-4", "--no-dense", "--out-dir", str(sparta)]) == 0
    assert main([*common, "--no-sparta", "--out-dir", str(dense)]) == 0
    # a model trained before, evaluated again on the same pools (as on scenes drawn at another size)
    trained = Path(json.loads((sparta / "quality.json").read_text())["results"][0]["dir"])
    again = tmp_path / "again"
    argv = [*common, "--weights", "3e-4", "--no-dense", "--trained", str(trained), "--out-dir", str(again)]
    assert main(argv) == 0
    first, second = (json.loads((d / "quality.json").read_text())["results"][0] for d in (sparta, again))

    def recalls(res: dict) -> list:
        return [(r["top_n"], r["recall"]) for r in res["rows"]] + [
            r["recall"] for r in res["heldout"].values()
        ]

    assert recalls(second) == recalls(first)  # (the query timings differ)
    assert second["seconds"] is not None and second["best_epoch"] == first["best_epoch"]
    merged = tmp_path / "merged"
    argv = ["bench", "quality", "--merge", str(sparta / "quality.json"), str(dense / "quality.json")]
    assert main([*argv, "--out-dir", str(merged)]) == 0
    data = json.loads((merged / "quality.json").read_text())
    assert [r["model"] for r in data["results"]] == ["visualsparta", "dense"]
    for res in data["results"]:
        assert set(res["heldout"]) == {"heldout_words", "heldout_objects", "shift"}
        assert all("10" in row["recall"] for row in res["heldout"].values())
        assert set(res["ceilings"]) == {"test", "shift", "heldout_words", "heldout_objects"}
        assert all(0 < c <= 100 for c in res["ceilings"].values())
    assert all(row["postings_per_query"] > 0 for row in data["results"][0]["rows"])
    md = (merged / "quality.md").read_text()
    label = "patch stem at 32 px, 2 layers, from scratch, 32 px scenes, <= 1 ep"
    assert f"| VisualSparta (flops 0.0003), {label} | heldout_words | 10 |" in md
    assert f"| dense, {label} | heldout_objects | 10 |" in md and f"| dense, {label} | shift | 10 |" in md
    lead = md.index("| model | lr | best epoch | train s | terms/img | test | shift |")
    assert lead < md.index("| model | lr | best epoch | train s | top-n |")  # the summary comes first


@pytest.mark.slow
def test_quality_bench_shares_a_frozen_stems_caches_between_recipes(tmp_path: Path) -> None:
    """Two recipes on the pretrained stem: the training regions, each view of them, and every
    evaluation pool are computed once, into the run's feature folders."""
    from vsparta.cli import main

    common = ["bench", "quality", "--quick", "--kind", "objects", "--train", "24", "--val", "8"]
    common += ["--test", "8", "--heldout", "8", "--size", "64", "--epochs", "1", "--batch-size", "8"]
    config = json.dumps({**LITE, "stem_weights": None})  # ImageNet weights: the same stem for both
    common += ["--config", config, "--threads", "1", "--cache-dir", str(tmp_path / "cache")]
    common += ["--augment-views", "2", "--no-write", "--weights", "3e-4"]
    assert main([*common, "--no-dense"]) == 0
    (features,) = (tmp_path / "cache" / "features").iterdir()  # one stem: one folder for every pool
    caches = sorted(p.parent.name for p in features.rglob("meta.json"))
    assert caches == ["heldout_objects", "heldout_words", "shift", "test", "train", "val"]
    built = {p: p.stat().st_mtime_ns for p in features.rglob("meta.json")}
    assert main([*common, "--no-sparta"]) == 0  # the dense model on the same stem: nothing rebuilt
    assert {p: p.stat().st_mtime_ns for p in features.rglob("meta.json")} == built
    train_key = json.loads((features / "train" / "meta.json").read_text())["key"]
    assert train_key["views"]["views"] == 2 and train_key["count"] == 24


@pytest.mark.slow
def test_quality_bench_on_emoji_subgroups_draws_only_their_objects(tmp_path: Path) -> None:
    from vsparta.cli import main
    from vsparta.scenes.emoji_catalog import select

    groups = ("food-fruit", "animal-bird")
    argv = ["bench", "quality", "--quick", "--kind", "objects", "--groups", ",".join(groups)]
    argv += ["--train", "40", "--val", "12", "--test", "12", "--heldout", "10", "--size", "32"]
    argv += ["--epochs", "1", "--batch-size", "16", "--config", json.dumps(TINY), "--threads", "2"]
    argv += ["--weights", "3e-4", "--no-dense", "--cache-dir", str(tmp_path / "cache")]
    assert main([*argv, "--train-look", "varied", "--out-dir", str(tmp_path / "out")]) == 0
    allowed = {o.name for o in select(groups)}
    (folder,) = (tmp_path / "cache").glob("objects-*-food-fruit+animal-bird-varied")
    train = [json.loads(line)["metadata"] for line in (folder / "train.jsonl").read_text().splitlines()]
    test = [json.loads(line)["metadata"] for line in (folder / "test.jsonl").read_text().splitlines()]
    assert {m["style"] for m in train} == {"varied"} and {m["style"] for m in test} == {"seen"}
    drawn = {
        obj["name"]
        for manifest in folder.glob("*.jsonl")
        for line in manifest.read_text(encoding="utf-8").splitlines()
        for obj in json.loads(line)["metadata"]["objects"]
    }
    assert drawn and drawn <= allowed
    data = json.loads((tmp_path / "out" / "quality.json").read_text())
    assert data["meta"]["settings"]["groups"] == list(groups)
    assert data["meta"]["settings"]["train_look"] == "varied"
    assert (
        "objects scenes of groups food-fruit, animal-bird, 40 train"
        in (tmp_path / "out" / "quality.md").read_text()
    )


@pytest.mark.parametrize(
    ("extra", "sentence"),
    [
        (["--groups", "food-fruit"], "--groups picks emoji objects; it needs --kind objects"),
        (["--kind", "objects", "--groups", "food-fruitz"], "unknown emoji group/subgroup 'food-fruitz'"),
        (["--train-look", "varied"], "--train-look draws object scenes; it needs --kind objects"),
    ],
)
def test_quality_bench_refuses_wrong_scene_options_in_one_sentence(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, extra: list[str], sentence: str
) -> None:
    from vsparta.cli import main

    code = main(["bench", "quality", "--quick", *extra, "--cache-dir", str(tmp_path / "cache"), "--no-write"])
    assert code == 2
    assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"][0].startswith(sentence)
    assert not (tmp_path / "cache").exists()  # refused before a scene was drawn


def test_merged_rows_name_the_recipe_options_a_variant_name_does_not_show() -> None:
    from vsparta.bench.quality_report import _recipe_notes

    frozen = json.dumps({"num_hidden_layers": 2, "freeze_word_embeddings": True})
    dense = json.dumps({"pooling": "mean", "similarity": "cosine"})
    assert _recipe_notes(frozen) == ", frozen word embeddings"
    assert _recipe_notes(dense) == ", mean pooling, cosine"
    assert _recipe_notes("tiny") == _recipe_notes(json.dumps({"pooling": "cls"})) == ""


def test_merged_rows_name_a_json_config_by_the_preset_it_equals(tmp_path: Path) -> None:
    from vsparta.bench.quality_report import _config_name, _views
    from vsparta.model.configuration import PRESETS

    file = tmp_path / "lite0-320.json"
    file.write_text(json.dumps(PRESETS["lite0-320"]))
    assert _config_name(str(file)) == _config_name(json.dumps(PRESETS["lite0-320"])) == "lite0-320"
    assert _config_name(json.dumps({**PRESETS["lite0"], "image_size": 288})) == (
        "efficientnet_lite0 stem at 288 px, 2 layers"
    )
    assert _views({"augment_views": 2, "augment_scale": [0.5, 1.8]}) == ", 2 views zoomed 0.5-1.8x"
    assert _views({"augment_views": 2, "augment_scale": [0.7, 1.3]}) == _views({"augment_views": 2})
    assert _views({"augment_views": 2, "train_look": "varied"}) == ", 2 views, varied look"
    assert _views({"train_look": "seen"}) == _views({}) == ""
