"""The indexing job's own memory as the input grows, and the folder listing's speed (issue 24).

Two measurements on image folders that already exist (a million hard links to a few thousand
small JPEGs, docs/indexing.md says how to make them):

- ``jobs``: ``vsparta index FOLDER --fake-encoder --backend embedded:...`` as a child process,
  its anonymous resident memory (``RssAnon`` of /proc/PID/status: the process's own memory, not
  the page cache of the files and index segments it maps) sampled every 0.5 s, peak and last;
  the decode worker processes are reported apart.
- ``listing``: items per second of the reader over the same folders, this checkout against an
  older one (``--old-python``: a venv with the other checkout installed), interleaved runs of
  each in a fresh process with the folder's entries already cached, and their ratio.

    python -m bench.listing_memory --folders /tmp/indexer-100k/images /tmp/indexer-1m/images \\
        --old-python /tmp/indexer-old/.venv/bin/python --json docs/indexing/listing-memory.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from vsparta.bench.hardware import write_result

# Lists a folder with the reader of whichever checkout the interpreter imports: the lazy
# iter_items when it has one, else the list of read_items; prints items and seconds.
LISTING_SCRIPT = """
import json, sys, time
from vsparta.indexer import reader
t = time.perf_counter()
lazy = hasattr(reader, "iter_items")
items = (reader.iter_items if lazy else reader.read_items)(sys.argv[1], "images")
n = sum(1 for _ in items)
print(json.dumps({"items": n, "seconds": time.perf_counter() - t, "lazy": lazy}))
"""


def status_kib(pid: int, field: str) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(x) for x in text.split()]


def run_job(python: str, folder: Path, workdir: Path, interval: float = 0.5) -> dict:
    """One indexing job with the fake encoder; its RssAnon sampled until it exits."""
    index = workdir / "index"
    shutil.rmtree(index, ignore_errors=True)
    cmd = [
        python, "-m", "vsparta.cli", "index", str(folder), "--fake-encoder", "--fake-image-size", "32",
        "--backend", f"embedded:{index}", "--no-progress", "--workers", "1", "--batch-size", "64",
    ]  # fmt: skip
    log_path = workdir / f"job-{folder.parent.name}.log"
    start, wall_start = time.perf_counter(), time.time()
    with log_path.open("w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        samples: list[tuple[float, int, int]] = []  # seconds, own RssAnon KiB, workers' RssAnon KiB
        while proc.poll() is None:
            own = status_kib(proc.pid, "RssAnon")
            workers = sum(status_kib(c, "RssAnon") or 0 for c in _children(proc.pid))
            if own is not None:
                samples.append((time.perf_counter() - start, own, workers))
            time.sleep(interval)
    seconds = time.perf_counter() - start
    lines = log_path.read_text().splitlines()
    tail = lines[-6:]
    listed_at = _seconds_of(lines, ("items listed", "items to index"), wall_start)  # new, old
    shutil.rmtree(index, ignore_errors=True)
    if proc.returncode != 0 or not samples:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {tail}")
    own_mb = [s[1] / 1024 for s in samples]
    return {
        "folder": str(folder),
        "files": _count_files(folder),
        "seconds": round(seconds, 1),
        "own_rss_anon_peak_mb": round(max(own_mb), 1),
        "own_rss_anon_median_mb": round(sorted(own_mb)[len(own_mb) // 2], 1),
        "own_rss_anon_last_mb": round(own_mb[-1], 1),
        "workers_rss_anon_peak_mb": round(max(s[2] for s in samples) / 1024, 1),
        # The walk's share: the peak until the listing ended, and after it (the last writes and
        # the engine's final merge, `finish_load`).
        "listing_done_s": None if listed_at is None else round(listed_at, 1),
        "own_rss_anon_peak_while_listing_mb": _peak([s for s in samples if listed_at and s[0] <= listed_at]),
        "own_rss_anon_peak_after_listing_mb": _peak([s for s in samples if listed_at and s[0] > listed_at]),
        "samples": len(samples),
        "timeline_s_own_mb": [
            [round(t), round(own / 1024)] for t, own, _ in samples[:: max(1, len(samples) // 200)]
        ],
        "log_tail": tail,
    }


def _peak(samples: list[tuple[float, int, int]]) -> float | None:
    return round(max(s[1] for s in samples) / 1024, 1) if samples else None


def _seconds_of(lines: list[str], markers: tuple[str, ...], wall_start: float) -> float | None:
    """Seconds from the job's start to the first log line with one of ``markers`` (its timestamp)."""
    from datetime import datetime

    for line in lines:
        if any(m in line for m in markers):
            stamp = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
            return stamp.timestamp() - wall_start
    return None


def _count_files(folder: Path) -> int:
    return sum(len(files) for _, _, files in os.walk(folder))


def time_listing(python: str, folder: Path) -> dict:
    out = subprocess.run(
        [python, "-c", LISTING_SCRIPT, str(folder)], capture_output=True, text=True, check=True
    ).stdout
    result = json.loads(out.strip().splitlines()[-1])
    result["items_per_second"] = round(result["items"] / result["seconds"], 1)
    return result


def listing_rounds(new_python: str, old_python: str, folder: Path, rounds: int) -> dict:
    """Interleaved old/new listings of one folder; the ratio of their median rates."""
    _count_files(folder)  # the folder's entries into the cache for both
    runs: dict[str, list[dict]] = {"old": [], "new": []}
    for _ in range(rounds):
        runs["old"].append(time_listing(old_python, folder))
        runs["new"].append(time_listing(new_python, folder))

    def median(kind: str) -> float:
        rates = sorted(r["items_per_second"] for r in runs[kind])
        return rates[len(rates) // 2]

    return {
        "folder": str(folder),
        "items": runs["new"][0]["items"],
        "old_items_per_second": median("old"),
        "new_items_per_second": median("new"),
        "new_over_old": round(median("new") / median("old"), 3),
        "runs": runs,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--folders", type=Path, nargs="+", required=True, help="image folders, smallest first")
    ap.add_argument("--old-python", help="interpreter of the checkout to compare the listing with")
    ap.add_argument("--old-job-folders", type=Path, nargs="*", default=[], help="also run the job there, old")
    ap.add_argument("--rounds", type=int, default=3, help="listing runs of each checkout per folder")
    ap.add_argument("--skip", choices=("jobs", "listing"), action="append", default=[])
    ap.add_argument("--workdir", type=Path, help="where the jobs' indexes go (default: a temp folder)")
    ap.add_argument("--json", type=Path, help="write the result here")
    args = ap.parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="indexer-listing-"))
    workdir.mkdir(parents=True, exist_ok=True)
    result: dict = {"jobs": [], "listing": []}
    if "jobs" not in args.skip:
        runs = [(sys.executable, "new", f) for f in args.folders]
        runs += [(args.old_python, "old", f) for f in args.old_job_folders if args.old_python]
        for python, checkout, folder in runs:
            row = {"checkout": checkout, **run_job(python, folder, workdir)}
            result["jobs"].append(row)
            own, median = row["own_rss_anon_peak_mb"], row["own_rss_anon_median_mb"]
            print(
                f"job ({checkout}) {row['files']:>9,} files: own RssAnon peak {own:.0f} MB (median"
                f" {median:.0f}; while listing {row['own_rss_anon_peak_while_listing_mb']}, after"
                f" {row['own_rss_anon_peak_after_listing_mb']}), workers"
                f" {row['workers_rss_anon_peak_mb']:.0f} MB, {row['seconds']:.0f} s",
                flush=True,
            )
        if len(args.folders) > 1:
            new = [r for r in result["jobs"] if r["checkout"] == "new"]
            first, last = new[0], new[-1]
            result["own_peak_growth"] = round(last["own_rss_anon_peak_mb"] / first["own_rss_anon_peak_mb"], 3)
    if "listing" not in args.skip and args.old_python:
        for folder in args.folders:
            row = listing_rounds(sys.executable, args.old_python, folder, args.rounds)
            result["listing"].append(row)
            print(
                f"listing {row['items']:>9,} files: old {row['old_items_per_second']:,.0f}/s,"
                f" new {row['new_items_per_second']:,.0f}/s, new/old {row['new_over_old']:.2f}",
                flush=True,
            )
    if args.json:
        write_result(args.json, result, "listing_memory", argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
