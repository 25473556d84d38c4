"""``bench/heldout_alone.py``: held-out words asked alone, on real object scenes and a real model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from vsparta.bench.heldout_alone import (
    PhraseQueries,
    check_split,
    hit_rates,
    main,
    only_held_words,
    phrase_queries,
)
from vsparta.core.manifest import read_manifest
from vsparta.scenes.objects import generate_object_scenes, held_out

GROUPS = ("food-fruit", "food-sweet", "plant-flower", "animal-bird")  # the demo's: a small catalog


@pytest.fixture(scope="module")
def scenes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("scenes")
    generate_object_scenes(
        folder, {"heldout_words": 16}, image_size=32, seed=0, groups=GROUPS, progress=False
    )
    return folder


def test_phrases_and_what_they_find(scenes: Path) -> None:
    records = read_manifest(scenes / "heldout_words.jsonl")
    objects, vocab = held_out(0, GROUPS)
    check_split(records, objects, vocab)
    by_name = {o.name: o for o in objects}
    held = phrase_queries(records, objects, vocab, True)
    seen = phrase_queries(records, objects, vocab, False)
    assert held.phrases and seen.phrases
    assert all(set(p.split()) & vocab.held_words for p in held.phrases)
    assert not any(set(p.split()) & vocab.held_words for p in seen.phrases)
    for queries in (held, seen):
        for phrase, rows in zip(queries.phrases, queries.relevant, strict=True):
            assert len(rows) > 0
            for i, record in enumerate(records):  # relevant exactly when an object of it is named so
                shown = [by_name[o["name"]] for o in record.metadata["objects"]]
                names = {n for obj in shown for n in (*obj.phrases, *obj.categories)}
                assert (phrase in names) == (i in set(rows.tolist()))
    only = only_held_words(held, vocab.held_words)
    assert all(set(p.split()) <= vocab.held_words for p in only.phrases)


def test_scenes_of_another_seed_are_refused(scenes: Path) -> None:
    records = read_manifest(scenes / "heldout_words.jsonl")
    objects, vocab = held_out(0, ())  # the whole catalog: other held-out words
    with pytest.raises(ValueError, match="hold no held-out word"):
        check_split(records, objects, vocab)


def test_hit_rates_count_ties_against_the_phrase() -> None:
    queries = PhraseQueries(["a", "b", "c"], [np.array([0]), np.array([1, 2]), np.array([3])])
    scores = np.array(
        [
            [2.0, 1.0, 0.0, 0.0],  # first: rank 1
            [3.0, 1.0, 2.0, 0.0],  # best relevant (2.0) behind one: rank 2
            [0.0, 0.0, 0.0, 0.0],  # all tied at 0: behind the 3 others, rank 4
        ]
    )
    rates = hit_rates(scores, queries)
    assert rates["hit@1"] == pytest.approx(1 / 3)
    assert rates["hit@5"] == 1.0
    assert rates["mrr"] == pytest.approx((1 + 1 / 2 + 1 / 4) / 3)
    assert queries.chance_at_1(4) == pytest.approx((1 / 4 + 2 / 4 + 1 / 4) / 3)


def test_the_command_on_a_saved_model(scenes: Path, tmp_path: Path, capsys) -> None:
    from vsparta.model.configuration import config_from_spec
    from vsparta.model.modeling import build_model

    model = tmp_path / "model"
    build_model(config_from_spec("tiny")).save_pretrained(model)
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exc:  # a folder without config.json: one sentence, exit 2
        main(["--scenes", str(scenes), "--model", f"tiny={tmp_path}"])
    assert exc.value.code == 2 and "is not a saved model folder" in capsys.readouterr().err
    assert main(["--scenes", str(scenes), "--groups", ",".join(GROUPS), "--model", f"tiny={model}",
                 "--out-dir", str(out)]) == 0  # fmt: skip
    result = json.loads((out / "heldout-alone.json").read_text())
    assert result["images"] == 16
    assert [r["words"] for r in result["rows"]] == ["held-out", "held-out, every word", "seen (control)"]
    for row in result["rows"]:
        assert row["model"] == "tiny" and row["phrases"] > 0
        assert 0 <= row["hit@1"] <= row["hit@5"] <= row["hit@10"] <= 1 and 0 < row["chance@1"] < 1
    assert "| tiny | held-out |" in (out / "heldout-alone.md").read_text()
    assert main(["--scenes", str(scenes), "--model", f"tiny={model}"]) == 2  # scenes of other groups
    assert "hold no held-out word" in capsys.readouterr().err
