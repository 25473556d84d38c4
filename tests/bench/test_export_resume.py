"""bench.export_resume and bench.reindex_memory run real `vsparta index` jobs on a small export and
compare two checkouts (here the same one twice)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from vsparta.bench import export_resume, reindex_memory


@pytest.mark.slow
def test_export_benches_measure_resumed_and_reindexing_jobs(tmp_path: Path) -> None:
    out = tmp_path / "resume.json"
    root = tmp_path / "root"
    argv = ["--root", str(root), "--files", "30", "--rounds", "1", "--old-python", sys.executable]
    assert export_resume.main([*argv, "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["files"] == 30 and result["export_bytes"] > 30 * 10_000  # 1,000 terms a line
    for name in ("new", "old"):
        (nothing_new,) = result[name]["nothing_new"]
        (one_changed,) = result[name]["one_changed"]
        assert nothing_new["summary"][0].startswith("indexed 0, skipped (resume) 30, failed 0 of 30 ")
        assert one_changed["summary"][0].startswith("indexed 1, skipped (resume) 29, failed 0 of 30")
        (write,) = result[name]["write"]
        assert (
            write["summary"][0].startswith("indexed 30, skipped (resume) 0, failed 0 of 30")
            and write["bytes"] > 0
        )
    assert result["speedup_nothing_new"] > 0 and result["speedup_one_changed"] > 0
    lines = [
        json.loads(line)["id"]
        for p in (root / "export").glob("*.jsonl")
        for line in p.read_text().splitlines()
    ]
    assert len(lines) == len(set(lines)) == 30  # each changed file's old line left its part

    out = tmp_path / "reindex.json"
    argv = ["--export", str(root / "export"), "--parts", "3", "--rounds", "1", "--old-python", sys.executable]
    assert reindex_memory.main([*argv, "--work", str(tmp_path / "work"), "--out", str(out)]) == 0
    (size,) = json.loads(out.read_text())["sizes"]
    assert size["parts"] == 3 and size["export_bytes"] > 0  # the first part and the two changed lines
    for name in ("new", "old"):
        (run,) = size[name]
        assert run["summary"][0].startswith("indexed 30, skipped (resume) 0, failed 0 of 30")
        assert 10 < run["peak_mib"] < 4000
