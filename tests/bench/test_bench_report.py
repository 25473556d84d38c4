"""The writers produce the table, plot and JSON the issue asks for, from rows of raw numbers."""

from __future__ import annotations

import json

import pytest

from bench import report
from bench.cli import parse_engine_budget, parse_engines, parse_size
from bench.hardware import describe

ROWS = [
    {
        "engine": "scipy (exhaustive)",
        "kind": "exact (oracle)",
        "n_docs": 1000,
        "size": "1K",
        "qps_1": 2000.0,
        "qps_all": 3500.0,
        "p50_ms": 0.4,
        "p99_ms": 1.1,
        "agreement": 1.0,
        "build_s": 0.2,
        "bytes_per_image": 8000.0,
        "bytes_per_term": 8.0,
        "peak_mem_bytes": 9 * 2**20,
    },
    {
        "engine": "PISA (maxscore, 8-bit)",
        "kind": "exact, 8-bit impacts",
        "n_docs": 1000,
        "size": "1K",
        "qps_1": 1000.0,
        "qps_all": 1900.0,
        "p50_ms": 0.9,
        "p99_ms": 2.0,
        "agreement": 0.98,
        "build_s": 0.5,
    },
    {"engine": "scipy (exhaustive)", "kind": "exact (oracle)", "n_docs": 5000, "size": "5K", "qps_1": 500.0},
    {"engine": "Seismic", "kind": "approximate", "n_docs": 5000, "size": "5K", "skipped": "build too slow"},
]


@pytest.fixture
def meta():
    return {
        "command": "vsparta bench engines --quick",
        "hardware": describe(),
        "documents": "synthetic",
        "queries": "200 captions",
        "notes": ["a note"],
    }


def test_markdown_has_table_paper_hardware_and_skips(tmp_path, meta):
    path = tmp_path / "docs" / "benchmarks.md"
    report.write_markdown(ROWS, meta, path)
    text = path.read_text()
    assert "vsparta bench engines --quick" in text and meta["hardware"]["cpu"] in text
    assert "| PISA (maxscore, 8-bit) | exact, 8-bit impacts | 1K | 1,000 | 0.50x |" in text
    assert "| paper: VisualSparta (top-1000) | 10-core CPU | 1K |" in text and "| 451 |" in text
    assert "| 390 |" in text  # paper's 5K figure beside ours
    assert "Seismic at 5K: build too slow" in text


def test_plot_is_a_png(tmp_path, meta):
    path = tmp_path / "benchmarks.png"
    report.write_plot(ROWS, meta, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000


def test_json_keeps_raw_rows_with_ratios(tmp_path, meta):
    path = tmp_path / "benchmarks.json"
    report.write_json(ROWS, meta, path)
    data = json.loads(path.read_text())
    assert data["rows"][1]["x_scipy"] == pytest.approx(0.5)
    assert data["paper"]["paper: dense baseline (CPU)"]["1000000"] == 0.3


def test_print_table_runs(capsys, meta):
    report.print_table(ROWS, meta)
    out = capsys.readouterr().out
    assert "PISA" in out and "[1] Seismic at 5K: build too slow" in out


def test_cli_parsers():
    assert parse_size("1K") == ("1K", 1000)
    assert parse_size("113K") == ("113K", 113_287)
    assert parse_size("1M") == ("1M", 1_000_000)
    assert parse_size("2500") == ("2500", 2500)
    with pytest.raises(ValueError, match="bad size"):
        parse_size("lots")
    assert parse_engines("scipy, pisa") == ["scipy", "pisa"]
    with pytest.raises(ValueError, match="unknown engine"):
        parse_engines("scipy,lucene")


def test_engine_budget_parser_and_its_use_in_skipping():
    import argparse

    from bench.corpus import Corpus
    from bench.runner import _History, _skip_by_history

    assert parse_engine_budget("elasticsearch=4000") == ("elasticsearch", 4000.0)
    for bad in ("lucene=10", "elasticsearch=soon", "elasticsearch=-1"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_engine_budget(bad)
    import numpy as np

    big = Corpus(np.array([0, 10_000]), np.zeros(10_000, np.int32), np.ones(10_000, np.float32), 10)
    hist = _History(n_postings=1000, build_s=100.0, peak_bytes=0)  # 10x the postings: ~1000 s
    assert "over the 600 s budget" in _skip_by_history(hist, big, 600.0)
    assert _skip_by_history(hist, big, 4000.0) is None
