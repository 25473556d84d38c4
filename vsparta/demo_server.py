"""How `vsparta demo` serves once its index is built: it becomes `vsparta serve`.

The demo's earlier steps (training, indexing, evaluation) load torch into its process: ~1.5 GB
resident, which the service never needs. So the demo does not serve from that process: it
replaces its program with `vsparta serve` (``os.execv``: same process id, a fresh interpreter that
imports no torch, as the service always runs), and Ctrl-C or SIGTERM reach the server itself.

The address is printed only once the server answers ``/health`` (printed before start-up, it was
a dead link for the seconds the service takes to load). Nothing of the demo's process is left to
print it after the exec, so a small detached process does: started by a child that exits at once
(nothing is left unreaped), it polls until the server answers, the server's process is gone, or
five minutes passed.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import NoReturn

log = logging.getLogger(__name__)

ANNOUNCE_TIMEOUT_S = 300.0

# Run by `python -c` in a fresh interpreter (no threads: fork is safe there); the child exits at once.
_DETACHED_ANNOUNCER = """
import os, sys
if os.fork() == 0:
    from vsparta.demo_server import announce_detached
    announce_detached(*sys.argv[1:])
    os._exit(0)
"""


def become_server(argv: list[str], url: str, example_query: str, vsparta: Callable[..., int]) -> NoReturn:
    """Replace this process by `vsparta ARGV` (a serve command line), announcing ``url`` when it
    answers. ``vsparta``: the console script's entry point, handed to the demo for its steps; the
    new program is its module, run with ``python -m``."""
    module = sys.modules[vsparta.__module__]
    console_module = module.__spec__.name if module.__spec__ is not None else vsparta.__module__
    subprocess.run(
        [sys.executable, "-c", _DETACHED_ANNOUNCER, url, str(os.getpid()), example_query, _log_format()],
        check=True,
    )
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os.execv(sys.executable, [sys.executable, "-m", console_module, *argv])


def announce_detached(url: str, server_pid: str, example_query: str, log_format: str) -> None:
    """The detached announcer's body: the demo's log format, and the server's process to watch."""
    logging.basicConfig(level=logging.INFO, format=log_format)
    announce_when_ready(url, threading.Event(), example_query, server_pid=int(server_pid))


def announce_when_ready(
    url: str,
    stop: threading.Event,
    example_query: str,
    timeout_s: float = ANNOUNCE_TIMEOUT_S,
    server_pid: int | None = None,
) -> bool:
    """Log where to look once ``url`` answers ``/health``; False if it never did (stopped, timed out,
    or the server's process ended)."""
    deadline = time.monotonic() + timeout_s
    while not stop.is_set() and time.monotonic() < deadline and _alive(server_pid):
        try:
            with urllib.request.urlopen(url + "health", timeout=2) as resp:
                if resp.status == 200:
                    log.info(
                        "demo: serving on %s  (web page; API docs at %sdocs). Try a query such as "
                        "'%s'. Ctrl-C stops it.",
                        url,
                        url,
                        example_query,
                    )
                    return True
        except (urllib.error.URLError, OSError):
            pass
        stop.wait(0.25)
    return False


def _alive(pid: int | None) -> bool:
    if pid is None:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _log_format() -> str:
    """The format of this process's log lines (the console script's), for the announcer's line."""
    for handler in logging.getLogger().handlers:
        if handler.formatter is not None and handler.formatter._fmt:
            return handler.formatter._fmt
    return "%(message)s"
