"""The embedded engine's merge alone: its own memory and time, this checkout against an older one.

One index of ``--docs`` synthetic documents in ``--segments`` segments (a third of the first
segment's documents deleted, so the merge drops tombstones too) is built once; then each round
copies it and runs ``compact()`` in a fresh process of each checkout (``--old-python``: a venv
with the other checkout installed; the on-disk format is the same). The process samples its own
``RssAnon`` (not the page cache of the mapped segments) every 10 ms during the merge and reports
the rise over its value before (after a tiny warm-up merge has loaded numba and the kernels, as
the first merge of a long job does), and the merge's seconds.

    python -m bench.merge_memory --docs 1000000 --old-python /var/tmp/merge-old/.venv/bin/python \\
        --workdir /var/tmp/merge-work/merge-bench --json docs/indexing/merge-memory-1m.json
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from vsparta.bench.hardware import write_result
from vsparta.termindex.embedded.index import EmbeddedIndex

# Runs compact() on the index at argv[1] with whichever checkout the interpreter imports.
MERGE_SCRIPT = """
import json, sys, threading, time
from vsparta.termindex.embedded.index import EmbeddedIndex

def rss_anon_kib():
    for line in open("/proc/self/status"):
        if line.startswith("RssAnon:"):
            return int(line.split()[1])

# Warm-up: a tiny merge loads numba and the kernels (~30 MB, once per process, as in a long job).
warm = EmbeddedIndex(sys.argv[2], create=True, merge_factor=1000)
for part in range(2):
    warm.upsert_arrays([f"w{part}-{i}" for i in range(3)], [0, 2, 3, 5], [1, 5, 2, 0, 9], [1.0] * 5)
warm.delete(["w0-1"])
warm.compact()
index = EmbeddedIndex(sys.argv[1], merge_factor=1000)
before = rss_anon_kib()
peak, done = [before], threading.Event()

def sample():
    while not done.is_set():
        peak[0] = max(peak[0], rss_anon_kib())
        time.sleep(0.01)

sampler = threading.Thread(target=sample)
sampler.start()
t = time.perf_counter()
index.compact()
seconds = time.perf_counter() - t
done.set()
sampler.join()
peak[0] = max(peak[0], rss_anon_kib())
print(json.dumps({"seconds": seconds, "rss_anon_before_mb": before / 1024, "rss_anon_peak_mb": peak[0] / 1024,
                  "rise_mb": (peak[0] - before) / 1024, "segments_after": index.segment_count()}))
"""


def build_index(path: Path, docs: int, terms_per_doc: int, segments: int) -> None:
    """``segments`` commits of synthetic documents (ids like photo paths, small metadata)."""
    index = EmbeddedIndex(path, create=True, merge_factor=1000)
    rng = np.random.default_rng(0)
    per = -(-docs // segments)
    for start in range(0, docs, per):
        n = min(per, docs - start)
        ids = [f"photos/2026/{i // 1000:04d}/IMG_{i:08d}.jpg" for i in range(start, start + n)]
        stride = 30_522 // terms_per_doc  # one term per stride: distinct and ascending
        terms = rng.integers(0, stride, (n, terms_per_doc)) + np.arange(terms_per_doc) * stride
        weights = rng.uniform(0.01, 3.0, terms.size)
        meta = [{"path": i, "width": 640, "height": 480} for i in ids]
        index.upsert_arrays(ids, np.arange(0, terms.size + 1, terms_per_doc), terms.ravel(), weights, meta)
    first = [f"photos/2026/{i // 1000:04d}/IMG_{i:08d}.jpg" for i in range(0, per, 3)]
    index.delete(first)


def run_merge(python: str, base: Path, work: Path) -> dict:
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(base, work)
    try:
        cmd = [python, "-c", MERGE_SCRIPT, str(work), str(work.with_name("warm-up"))]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(work.with_name("warm-up"), ignore_errors=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=200_000)
    ap.add_argument("--terms-per-doc", type=int, default=40)
    ap.add_argument("--segments", type=int, default=8)
    ap.add_argument("--old-python", help="interpreter of the checkout to compare with")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workdir", type=Path, help="where the index goes (default: a temp folder)")
    ap.add_argument("--json", type=Path, help="write the result here")
    args = ap.parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="merge-memory-"))
    base = workdir / "base"
    shutil.rmtree(base, ignore_errors=True)
    build_index(base, args.docs, args.terms_per_doc, args.segments)
    checkouts = [("new", sys.executable)] + ([("old", args.old_python)] if args.old_python else [])
    runs: dict[str, list[dict]] = {name: [] for name, _ in checkouts}
    for _ in range(args.rounds):
        for name, python in checkouts:
            runs[name].append(run_merge(python, base, workdir / "run"))
            r = runs[name][-1]
            print(
                f"{name}: {args.docs:,} documents merged in {r['seconds']:.1f} s,"
                f" own memory +{r['rise_mb']:.0f} MB"
            )
    shutil.rmtree(base, ignore_errors=True)

    def median(name: str, key: str) -> float:
        values = sorted(r[key] for r in runs[name])
        return round(values[len(values) // 2], 2)

    result: dict = {
        "docs": args.docs,
        "terms_per_doc": args.terms_per_doc,
        "segments": args.segments,
        "runs": runs,
    }
    for name in runs:
        result[f"{name}_seconds"] = median(name, "seconds")
        result[f"{name}_rise_mb"] = median(name, "rise_mb")
    if "old" in runs:
        result["seconds_new_over_old"] = round(result["new_seconds"] / result["old_seconds"], 3)
    print(json.dumps({k: v for k, v in result.items() if k != "runs"}))
    if args.json:
        write_result(args.json, result, "merge_memory", argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
