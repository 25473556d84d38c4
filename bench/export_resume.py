"""What a job spends on its JSONL export: writing it, reading it back on resume, rewriting a part.

A folder of hard links to a few JPEGs (``--files``; ``prune_cost.build_folder``) is exported once
with the fake encoder (1,000 terms per image, the paper's n, like a model at its default top-n) and
no engine, so the export is all a resumed job reads. Then each round runs, in fresh processes of
each checkout in turn (``--old-python``: an interpreter that imports the other checkout): the
export of the folder's first sub-folder written afresh (10,000 files; its size shows how weights
are written), the resumed job with nothing new, and the resumed job after one file's modification
time changed (its line is written again and leaves its old part: a rewrite). Wall seconds and
peak memory come from ``wait4``.

    python -m vsparta.bench.export_resume --root /var/tmp/export-100k --files 100000 \\
        --old-python /tmp/oldpy --out docs/indexing/export-resume.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
from pathlib import Path

from vsparta.bench.process import run_process
from vsparta.bench.prune_cost import build_folder


def run_job(python: str, images: Path, export: Path, *extra: str) -> dict:
    """One `vsparta index` process of ``python``'s checkout: wall seconds and peak RSS (MiB)."""
    fake = ["--fake-encoder", "--fake-image-size", "32", "--workers", "0", "--batch-size", "64"]
    cmd = [python, "-m", "vsparta.cli", "index", str(images), "--export-jsonl", str(export), *fake]
    cmd += ["--no-progress", *extra]
    done = run_process(cmd, cwd="/")
    return {"seconds": done.seconds, "peak_mib": done.peak_mib, "summary": done.lines_with("indexed ")}


def touch_one(images: Path, n: int) -> None:
    """A new modification time for one file (its size stays): `--resume` writes it again. The file is
    a hard link first, so it becomes a copy of its own: its siblings keep their time."""
    path = sorted(images.rglob("*.jpg"))[n]
    copy = path.with_name(path.name + ".tmp")
    shutil.copy2(path, copy)
    os.replace(copy, path)
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, required=True, help="work folder (the image tree is kept)")
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--old-python", help="interpreter whose `vsparta` is the checkout to compare with")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    images = build_folder(args.root, args.files)
    export = args.root / "export"
    shutil.rmtree(export, ignore_errors=True)
    load = run_job(sys.executable, images, export)
    size = sum(p.stat().st_size for p in export.iterdir())
    checkouts = [("new", sys.executable)] + ([("old", args.old_python)] if args.old_python else [])
    phases = ("write", "nothing_new", "one_changed")
    runs: dict[str, dict[str, list[dict]]] = {n: {k: [] for k in phases} for n, _ in checkouts}
    first = sorted(images.iterdir())[0]  # one folder, written afresh by each checkout each round
    touched = 0
    for r in range(args.rounds):
        for name, python in checkouts if r % 2 == 0 else checkouts[::-1]:
            fresh = args.root / f"export-{name}"
            shutil.rmtree(fresh, ignore_errors=True)
            runs[name]["write"].append(run_job(python, first, fresh))
            runs[name]["write"][-1]["bytes"] = sum(p.stat().st_size for p in fresh.iterdir())
            shutil.rmtree(fresh)
            runs[name]["nothing_new"].append(run_job(python, images, export, "--resume"))
            touch_one(images, touched)
            touched += 1
            runs[name]["one_changed"].append(run_job(python, images, export, "--resume"))
    results = {"files": args.files, "export_bytes": size, "load_s": load["seconds"], "rounds": args.rounds}
    for name, _ in checkouts:
        results[name] = {
            **runs[name],
            **{f"median_{k}_s": statistics.median(x["seconds"] for x in v) for k, v in runs[name].items()},
            "peak_mib": max(x["peak_mib"] for v in runs[name].values() for x in v),
        }
    line = f"{args.files:,} documents, export {size / 2**30:.2f} GiB (written in {load['seconds']:.0f} s)"
    print(line)
    for name, _ in checkouts:
        f = results[name]
        print(
            f"{name}: writing {first.name}'s export {f['median_write_s']:.2f} s "
            f"({f['write'][0]['bytes'] / 2**20:,.0f} MiB); --resume, nothing new "
            f"{f['median_nothing_new_s']:.2f} s; "
            f"one file changed {f['median_one_changed_s']:.2f} s; peak {f['peak_mib']:.0f} MiB"
        )
    if args.old_python:
        for key in phases:
            pairs = zip(results["old"][key], results["new"][key], strict=True)
            results[f"speedup_{key}"] = statistics.median(o["seconds"] / n["seconds"] for o, n in pairs)
        print(
            f"old / new: writing {results['speedup_write']:.2f}x, "
            f"nothing new {results['speedup_nothing_new']:.2f}x, "
            f"one file changed {results['speedup_one_changed']:.2f}x (median of rounds)"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
