"""A pytest run stopped by SIGTERM runs its fixtures' teardown (``tests/signal_teardown.py``), on a
real pytest process given a real signal."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import signal_teardown

TESTS = Path(__file__).resolve().parent
slow = pytest.mark.slow  # a pytest process each, started and stopped
# A session fixture with a slow teardown, a test that waits (and may swallow the interrupt, as a
# test's own code can), and a second test that must not start once the run is stopped.
HELD = """
import time
from pathlib import Path

import pytest

HERE = Path(__file__).parent
SETTINGS = (HERE / "settings").read_text().split()


@pytest.fixture(scope="session")
def held():
    (HERE / "up").touch()
    yield
    time.sleep(float(SETTINGS[0]))
    (HERE / "down").touch()


def test_waits(held):
    try:
        time.sleep(60)
    except BaseException:
        if SETTINGS[1] != "swallow":
            raise


def test_after(held):
    (HERE / "second test ran").touch()
    time.sleep(60)
"""


def _run_and_stop(tmp_path: Path, signals: int = 1, teardown_s: float = 0, swallow: bool = False) -> str:
    (tmp_path / "test_held.py").write_text(HELD)
    (tmp_path / "settings").write_text(f"{teardown_s} {'swallow' if swallow else 'raise'}")
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "signal_teardown", "test_held.py"]
    env = os.environ | {"PYTHONPATH": str(TESTS)}
    proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)  # fmt: skip
    deadline = time.monotonic() + 60
    while not (tmp_path / "up").exists():
        assert proc.poll() is None and time.monotonic() < deadline, "the test session never set up"
        time.sleep(0.05)
    time.sleep(0.5)  # into the test
    t0 = time.monotonic()
    for _ in range(signals):
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
    out, _ = proc.communicate(timeout=60)
    assert time.monotonic() - t0 < 30, out  # neither 60 s test ran to its end
    assert (tmp_path / "down").exists(), out
    assert not (tmp_path / "second test ran").exists(), out
    assert proc.returncode != 0, out  # interrupted: never counted as a pass
    return out


@slow
def test_sigterm_runs_the_teardown_and_fails_the_run(tmp_path: Path) -> None:
    out = _run_and_stop(tmp_path)
    assert "stopped by signal 15 (SIGTERM)" in out


@slow
def test_a_second_sigterm_does_not_cut_the_teardown_short(tmp_path: Path) -> None:
    _run_and_stop(tmp_path, signals=2, teardown_s=1.5)


@slow
def test_a_test_that_swallows_the_interrupt_still_ends_the_run(tmp_path: Path) -> None:
    out = _run_and_stop(tmp_path, swallow=True)
    assert "stopped by SIGTERM" in out


def test_this_run_has_the_handler() -> None:
    """tests/conftest.py loads the plugin: this very session tears down on SIGTERM."""
    handler = signal.getsignal(signal.SIGTERM)
    assert isinstance(handler, functools.partial) and handler.func is signal_teardown._interrupt
