"""The writers produce the table, plot and JSON the issue asks for, from rows of raw numbers."""

from __future__ import annotations

import json

import numpy as np
import pytest

from vsparta.bench import report
from vsparta.bench.hardware import describe
from vsparta.bench.options import parse_engine_budget, parse_engines, parse_size

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


def test_plot_is_a_png_of_the_figure_size_with_a_drawn_chart(tmp_path, meta):
    from PIL import Image

    path = tmp_path / "benchmarks.png"
    report.write_plot(ROWS, meta, path)
    with Image.open(path) as image:
        assert image.format == "PNG"
        assert image.size == (990, 660)  # figsize 9 x 6 inches at 110 dpi
        pixels = np.asarray(image.convert("RGB")).reshape(-1, 3)
    colours = {tuple(c) for c in pixels[:: max(1, len(pixels) // 20_000)]}
    assert len(colours) > 20  # axes, labels and coloured series, not an empty canvas


def test_json_keeps_raw_rows_with_ratios(tmp_path, meta):
    path = tmp_path / "benchmarks.json"
    report.write_json(ROWS, meta, path)
    data = json.loads(path.read_text())
    assert data["rows"][1]["x_scipy"] == pytest.approx(0.5)
    assert data["paper"]["paper: dense baseline (CPU)"]["1000000"] == 0.3


def test_print_table_shows_each_row_its_ratio_the_paper_and_skips(capsys, meta):
    report.print_table(ROWS, meta)
    lines = capsys.readouterr().out.splitlines()

    def row(*start: str) -> list[str]:
        found = [ln for ln in lines if [c.strip() for c in ln.split("│")[1 : 1 + len(start)]] == list(start)]
        assert len(found) == 1, start
        return [c.strip() for c in found[0].split("│")[1:-1]]

    assert row("PISA (maxscore, 8-bit)", "exact, 8-bit impacts", "1K")[3:6] == ["1,000", "0.50x", "1,900"]
    assert row("scipy (exhaustive)", "exact (oracle)", "5K")[3:5] == ["500", "1.00x"]
    assert row("Seismic", "approximate", "5K")[3] == "skipped [1]"
    assert row("paper: VisualSparta (top-1000)", "10-core CPU", "5K")[5] == "390"
    assert "[1] Seismic at 5K: build too slow" in lines


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

    from vsparta.bench.corpus import Corpus
    from vsparta.bench.runner import _History, _skip_by_history

    assert parse_engine_budget("elasticsearch=4000") == ("elasticsearch", 4000.0)
    for bad in ("lucene=10", "elasticsearch=soon", "elasticsearch=-1"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_engine_budget(bad)
    big = Corpus(np.array([0, 10_000]), np.zeros(10_000, np.int32), np.ones(10_000, np.float32), 10)
    hist = _History(n_postings=1000, build_s=100.0, peak_bytes=0)  # 10x the postings: ~1000 s
    assert "over the 600 s budget" in _skip_by_history(hist, big, 600.0)
    assert _skip_by_history(hist, big, 4000.0) is None
