"""bench.listing_memory runs a real `vsparta index --fake-encoder` job, samples its own memory and
times the listing of two checkouts (here the same one twice, so the ratio is near 1)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from PIL import Image

from vsparta.bench import listing_memory


def test_listing_memory_bench_measures_a_job_and_the_listing(tmp_path: Path) -> None:
    folder = tmp_path / "tree" / "images"
    for i in range(30):
        (folder / f"d{i % 3}").mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (16, 12), (i * 8, 0, 0)).save(folder / f"d{i % 3}" / f"p{i}.jpg")
    out = tmp_path / "result.json"
    argv = ["--folders", str(folder), "--old-python", sys.executable, "--rounds", "1"]
    assert listing_memory.main([*argv, "--workdir", str(tmp_path / "work"), "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    (job,) = result["jobs"]
    assert job["checkout"] == "new" and job["files"] == 30 and job["samples"] >= 1
    assert 10 < job["own_rss_anon_peak_mb"] < 2000  # a Python process's own memory, in MB
    assert any("indexed 30," in line for line in job["log_tail"])
    assert job["listing_done_s"] is not None and job["own_rss_anon_peak_while_listing_mb"] is not None
    (listing,) = result["listing"]
    assert listing["items"] == 30 and listing["runs"]["new"][0]["lazy"] is True
    assert listing["new_over_old"] > 0
    assert result["command"].startswith("python -m bench.listing_memory") and "machine" in result
