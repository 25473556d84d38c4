"""scripts/test.sh runs the whole suite as two pytest processes side by side, split by the
``cluster_faults`` marker (tests/conftest.py gives it to every test on a local fault cluster):
the two selections must hold every test exactly once, or CI would skip some without saying so."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLUSTER_FILES = ("test_elastic_cluster.py", "test_elastic_masters.py", "test_elastic_partitions.py")


def collected(*args: str) -> set[str]:
    res = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return {line for line in res.stdout.splitlines() if "::" in line}


def test_the_two_processes_of_the_whole_run_hold_every_test_exactly_once() -> None:
    everything = collected("tests/termindex")
    clusters = collected("tests/termindex", "-m", "cluster_faults")
    rest = collected("tests/termindex", "-m", "not cluster_faults")
    assert clusters and rest
    assert not clusters & rest
    assert clusters | rest == everything
    assert all(t.split("::")[0].endswith(CLUSTER_FILES) for t in clusters), sorted(clusters)
    whole_files = {t for t in everything if t.split("::")[0].endswith(CLUSTER_FILES[:2])}
    assert whole_files <= clusters  # every test there runs on a fault cluster
