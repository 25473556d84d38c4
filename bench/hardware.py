"""What machine the numbers come from, stated beside every table."""

from __future__ import annotations

import os
import platform
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
