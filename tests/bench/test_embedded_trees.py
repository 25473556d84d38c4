"""``bench/embedded_trees.py`` times the embedded engine of two source trees on one corpus."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vsparta.bench.embedded_trees import main
from vsparta.bench.engines.service import default_model_dir

REPO = Path(__file__).resolve().parents[2]


def _args(tmp_path: Path, *trees: str) -> list[str]:
    captions = tmp_path / "test.jsonl"
    lines = [{"id": f"i{i}", "captions": [f"a {w} next to two large cars", f"some {w} and a dog"]}
             for i, w in enumerate(["pizza", "flower", "bird", "apple", "cake"])]  # fmt: skip
    captions.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return [*(a for t in trees for a in ("--tree", t)),
            "--profile", str(REPO / "docs/model-profile-objects-16k.npz"), "--captions", str(captions),
            "--model", str(default_model_dir()), "--docs", "1500", "--queries", "8", "--rounds", "3",
            "--workdir", str(tmp_path / "work")]  # fmt: skip


def test_two_trees_are_timed_in_turn_and_their_answers_compared(tmp_path: Path) -> None:
    """The same tree twice: each worker builds its own index in its own process, both answer every
    query in every round, and their top-10 lists agree."""
    out = tmp_path / "out"
    code = main([*_args(tmp_path, f"a={REPO}", f"b={REPO}"), "--out-dir", str(out)])
    assert code == 0
    rows = json.loads((out / "embedded-trees.json").read_text())["rows"]
    assert [r["tree"] for r in rows] == ["a", "b"]
    assert rows[0]["top10"] == rows[1]["top10"]
    assert all(r["p50_ms"] > 0 and 100 < r["bytes_per_image"] < 2000 for r in rows)
    table = (out / "embedded-trees.md").read_text()
    assert "| a |" in table and "| b |" in table and "NO" not in table
    assert len(list((tmp_path / "work").glob("index-*-1500"))) == 2  # one index per tree


def test_a_folder_without_the_engine_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--tree", f"x={tmp_path}", "--profile", "p", "--captions", "c", "--model", "m"])
    assert exc.value.code == 2


def test_a_worker_that_dies_ends_the_run_in_one_sentence(tmp_path: Path) -> None:
    """A tree whose engine cannot be imported (here: an empty ``termindex/embedded``)."""
    broken = tmp_path / "broken"
    (broken / "termindex" / "embedded").mkdir(parents=True)
    with pytest.raises(SystemExit, match="the worker for tree 'old' exited with code 1"):
        main(_args(tmp_path, f"old={broken}"))
