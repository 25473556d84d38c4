"""A test run stopped by SIGTERM tears down like one stopped by Ctrl-C.

Why: Python's default for SIGTERM is to die at once, skipping every fixture's teardown, and the
session fixtures hold things that outlive the process: a fault cluster's Elasticsearch nodes and
netfilter chains, compose stacks, the nodes a test starts. SIGTERM is what a CI timeout, ``kill``,
``timeout`` and ``scripts/test.sh`` (when it is stopped) send. The signal raises
``KeyboardInterrupt``, so pytest ends the session and runs every finalizer, and also sets the
session's ``shouldstop``, so the run still stops after the current test where that test's code
catches the exception (seen: a cluster test reported it as a failure, and the run went on).
A second SIGTERM during the teardown is ignored (SIGKILL still ends it; ``LocalCluster.reap_stale``
and ``fault_net.clean_stale`` then clean up in the next run). Loaded by ``tests/conftest.py``.
"""

from __future__ import annotations

import functools
import signal
import threading
from types import FrameType

import pytest


def _interrupt(session: pytest.Session, signum: int, frame: FrameType | None) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the teardown this starts must finish
    session.shouldstop = "stopped by SIGTERM"
    raise KeyboardInterrupt(f"stopped by signal {signum} (SIGTERM): tearing down")


def pytest_sessionstart(session: pytest.Session) -> None:
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, functools.partial(_interrupt, session))
