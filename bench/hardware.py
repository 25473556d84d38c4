"""What machine the numbers come from, stated beside every table."""

from __future__ import annotations

import json
import os
import platform
import sys
from pathlib import Path

import psutil


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def describe() -> dict:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "cpu": cpu_model(),
        "cores": cores,
        "ram_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "load_avg_at_start": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
        "os": f"{platform.system()} {platform.release()}",
    }


def one_line(hw: dict) -> str:
    load = hw["load_avg_at_start"]
    return f"{hw['cpu']}, {hw['cores']} cores, {hw['ram_gib']} GiB RAM (load avg at start {load})"


def write_result(path: Path, result: dict, module: str, argv: list[str] | None) -> None:
    """A ``python -m bench.X`` result as JSON, with the command that made it and this machine."""
    given = sys.argv[1:] if argv is None else argv
    stamped = {**result, "command": " ".join([f"python -m bench.{module}", *given]), "machine": describe()}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(stamped, indent=2) + "\n")
