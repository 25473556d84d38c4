"""`vsparta train` and `vsparta eval` end to end through the console-script entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import TINY

from vsparta.cli import main


def test_train_then_eval_both_models(toy_manifest: Path, tmp_path: Path, capsys) -> None:
    common = ["--manifest", str(toy_manifest), "--config", json.dumps(TINY), "--epochs", "2"]
    common += ["--batch-size", "8", "--lr", "3e-3", "--device", "cpu", "--no-progress"]
    assert main(["train", *common, "--out", str(tmp_path / "vs")]) == 0
    assert main(["train", *common, "--out", str(tmp_path / "dense"), "--model", "dense"]) == 0
    assert (tmp_path / "vs" / "checkpoint-epoch-2" / "trainer_state.pt").exists()
    out_json = tmp_path / "eval.json"
    code = main(
        ["eval", "--manifest", str(toy_manifest), "--model", str(tmp_path / "vs" / "final"),
         "--dense", str(tmp_path / "dense" / "final"), "--top-n", "5,all", "--json", str(out_json)]
    )  # fmt: skip
    assert code == 0
    table, err = capsys.readouterr()
    assert "encoding images: " in err  # a progress line (stderr is not a terminal here)
    assert "VisualSparta" in table and "dense" in table and "random" in table and "NDCG@25" in table
    report = json.loads(out_json.read_text())
    assert report["n_images"] == 16 and report["n_queries"] == 48
    assert [(r["model"], r["top_n"]) for r in report["rows"]] == [
        ("VisualSparta", 5),
        ("VisualSparta", "all"),
        ("dense", "-"),
        ("random", "-"),
    ]
    assert report["rows"][0]["terms_per_image"] <= 5
    for row in report["rows"]:
        assert set(row["recall"]["16"]) == {"R@1", "R@5", "R@10"} and 0.0 <= row["ndcg@25"] <= 1.0
    quiet = ["eval", "--manifest", str(toy_manifest), "--model", str(tmp_path / "vs" / "final")]
    assert main([*quiet, "--top-n", "5", "--no-progress"]) == 0  # like train and index
    table, err = capsys.readouterr()
    assert "VisualSparta" in table and "encoding images" not in err

    # Query weights: one VisualSparta row per weighting, same documents and queries.
    weighted = tmp_path / "weighted.json"
    args = [*quiet, "--top-n", "all", "--no-progress", "--query-weights", "counts,idf"]
    args += ["--json", str(weighted)]
    assert main(args) == 0
    rows = [r for r in json.loads(weighted.read_text())["rows"] if r["model"] == "VisualSparta"]
    assert [r["query_weights"] for r in rows] == ["counts", "idf"]
    assert rows[0]["terms_per_image"] == rows[1]["terms_per_image"]
    assert rows[0]["recall"] == report["rows"][1]["recall"]  # counts: the rows above
    assert " idf " in capsys.readouterr().out
    with pytest.raises(SystemExit) as bad:  # argparse: one sentence, exit 2
        main([*quiet, "--query-weights", "bm25"])
    assert bad.value.code == 2
    assert "query weights are a comma list of counts, idf, saturated, got 'bm25'" in capsys.readouterr().err

    # The benchmark over the same model: counts vs every other registered weighting, table + JSON.
    out_dir = tmp_path / "qw"
    bench = ["bench", "query-weights", "--checkpoint", f"toy={tmp_path / 'vs' / 'final'}"]
    assert main([*bench, "--split", f"test={toy_manifest}", "--out-dir", str(out_dir)]) == 0
    data = json.loads((out_dir / "query-weights.json").read_text())
    weightings = [(r["split"], r["query_weights"]) for r in data["rows"]]
    assert weightings == [("test", "counts"), ("test", "idf"), ("test", "saturated")]
    text = (out_dir / "query-weights.md").read_text()
    assert "| toy | test | 16 | natural |" in text and "d R@1" in text


def test_eval_rejects_wrong_model_kind(toy_manifest: Path, tmp_path: Path) -> None:
    assert main(["eval", "--manifest", str(toy_manifest)]) == 2  # neither --model nor --dense
    assert main(["eval", "--manifest", str(toy_manifest), "--model", str(tmp_path / "missing")]) == 2
