"""The indexing benchmark runs end to end on a tiny input and reports every figure."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import pytest

from bench import indexing


@pytest.mark.slow
def test_indexing_benchmark_reports_every_stage(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    indexing.add_arguments(parser)
    out = tmp_path / "figures.json"
    args = parser.parse_args(
        ["--images", "6", "--image-size", "80", "60", "--models", "tiny", "--engines", "embedded",
         "--write-docs", "40", "--terms-per-doc", "30", "--write-batch", "16", "--batch-size", "4",
         "--top-n", "50", "--json", str(out)]
    )  # fmt: skip
    assert indexing.run(args) == 0
    figures = json.loads(out.read_text())
    tiny = figures["models"]["tiny"]
    for key in (
        "decode_images_per_s",
        "encode_images_per_s",
        "pipeline_images_per_s",
        "pipeline_write_docs_per_s",
    ):
        assert math.isfinite(tiny[key]) and tiny[key] > 0, key
    assert tiny["mean_terms_per_image"] == 50
    assert figures["writes"]["embedded"]["docs_per_s"] > 0
