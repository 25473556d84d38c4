"""One command as a whole process: its wall seconds, its peak memory (``wait4``) and its output.

The indexing benchmarks time fresh `vsparta index` processes of two checkouts in turn; a failed
command stops the benchmark with its output, never a figure.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Finished:
    seconds: float
    peak_mib: float  # peak RSS (a child reports its parent's at the fork if larger: start from a small one)
    output: str

    def lines_with(self, *texts: str) -> list[str]:
        """Its output's lines holding any of ``texts``, each without the logger's prefix (up to
        ``": "``)."""
        return [line.split(": ", 1)[-1] for line in self.output.splitlines() if any(t in line for t in texts)]


def run_process(cmd: list[str], cwd: str | None = None) -> Finished:
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=cwd)
    out = proc.stdout.read() if proc.stdout else ""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{out}")
    return Finished(wall, usage.ru_maxrss / 1024, out)
