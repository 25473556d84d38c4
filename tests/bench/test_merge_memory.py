"""bench.merge_memory builds a multi-segment index, merges it in fresh processes of two checkouts
(here the same one twice) and reports each merge's own-memory rise and time."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from vsparta.bench import merge_memory
from vsparta.termindex.embedded.index import EmbeddedIndex


def test_merge_memory_bench_merges_and_measures(tmp_path: Path) -> None:
    built = tmp_path / "built"
    merge_memory.build_index(built, docs=300, terms_per_doc=10, segments=3)
    index = EmbeddedIndex(built)
    assert index.segment_count() == 3 and index.count() == 300 - 34  # a third of the first 100 deleted
    out = tmp_path / "result.json"
    argv = ["--docs", "300", "--terms-per-doc", "10", "--segments", "3", "--old-python", sys.executable]
    assert (
        merge_memory.main([*argv, "--rounds", "1", "--workdir", str(tmp_path / "w"), "--json", str(out)]) == 0
    )
    result = json.loads(out.read_text())
    for name in ("new", "old"):
        (run,) = result["runs"][name]
        assert run["segments_after"] == 1 and run["seconds"] > 0
        assert 10 < run["rss_anon_peak_mb"] < 2000 and run["rise_mb"] >= 0
    assert result["seconds_new_over_old"] > 0
    assert result["command"].startswith("python -m bench.merge_memory") and "machine" in result
    assert not [p.name for p in (tmp_path / "w").iterdir()]  # base, run and warm-up removed
