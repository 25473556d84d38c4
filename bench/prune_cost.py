"""What `vsparta index --resume --prune` costs beside `--resume` on a large folder with nothing new.

A folder of hard links to a few JPEGs (``--files``; built once, as the indexing benchmarks' trees) is
indexed with the fake encoder into each target; ``--delete`` of its files are removed; then each
round runs the resumed job without and with ``--prune`` in turn, in fresh processes (``--workers 0``:
one process, so ``wait4`` gives its whole peak memory). The first run with ``--prune`` removes the
deleted files' documents; later ones list the target and find nothing to remove, the steady cost.

    python -m vsparta.bench.prune_cost --root /var/tmp/prune-100k --files 100000 \\
        --backend embedded --backend http://127.0.0.1:9200 --out docs/indexing/prune-cost.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

from vsparta.bench.process import run_process

PER_FOLDER = 10_000


def build_folder(root: Path, files: int, originals: int = 1_000) -> Path:
    """``files`` hard links to ``originals`` 64x48 photo-like JPEGs (``photos.make_images``, as the
    indexing benchmarks' trees), ``PER_FOLDER`` per subfolder."""
    from vsparta.bench.photos import make_images

    originals = min(originals, files)
    images = root / "images"
    if images.is_dir() and sum(1 for _ in images.rglob("*.jpg")) == files:
        return images
    shutil.rmtree(images, ignore_errors=True)
    source = make_images(root / "originals", originals, (64, 48))
    for n in range(files):
        folder = images / f"f{n // PER_FOLDER:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        os.link(source[n % originals], folder / f"p{n:07d}.jpg")
    return images


def run_job(images: Path, backend: str, *extra: str) -> dict:
    """One `vsparta index` process: wall seconds, peak RSS (MiB) and its summary's first lines."""
    vsparta = str(Path(sys.executable).with_name("vsparta"))
    fake = ["--fake-encoder", "--fake-image-size", "32", "--workers", "0", "--batch-size", "64"]
    cmd = [vsparta, "index", str(images), "--backend", backend, *fake, "--no-progress", *extra]
    done = run_process(cmd)
    summary = done.lines_with("indexed ", "removed ")
    return {"seconds": done.seconds, "peak_mib": done.peak_mib, "summary": summary}


def measure(images: Path, backend: str, rounds: int) -> dict:
    plain, pruned = [], []
    for _ in range(rounds):
        plain.append(run_job(images, backend, "--resume"))
        pruned.append(run_job(images, backend, "--resume", "--prune"))
    steady = pruned[1:] or pruned
    return {
        "resume": plain,
        "resume_prune": pruned,
        "median_resume_s": statistics.median(r["seconds"] for r in plain),
        "median_prune_s": statistics.median(r["seconds"] for r in steady),
        "first_prune_s": pruned[0]["seconds"],
        "ratio": statistics.median(
            p["seconds"] / r["seconds"] for r, p in zip(plain[1:] or plain, steady, strict=True)
        ),
        "peak_mib_resume": max(r["peak_mib"] for r in plain),
        "peak_mib_prune": max(r["peak_mib"] for r in pruned),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, required=True, help="work folder (the image tree is kept)")
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--delete", type=int, default=1_000, help="files removed before the rounds")
    parser.add_argument("--rounds", type=int, default=3)
    where = "'embedded' (an index under --root) or an Elasticsearch/OpenSearch URL"
    parser.add_argument("--backend", action="append", required=True, help=where)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    results = {"files": args.files, "deleted": args.delete, "rounds": args.rounds, "targets": {}}
    for name in args.backend:
        images = build_folder(args.root, args.files)
        if name == "embedded":
            shutil.rmtree(args.root / "index", ignore_errors=True)
            backend = f"embedded:{args.root / 'index'}"
        else:
            backend = f"{name.rstrip('/')}/prune-cost-{int(time.time())}"
        load = run_job(images, backend)
        for path in sorted(images.rglob("*.jpg"))[:: args.files // args.delete][: args.delete]:
            path.unlink()
        figures = measure(images, backend, args.rounds)
        figures["load_s"] = load["seconds"]
        if name != "embedded":
            from vsparta.termindex import open_index

            with open_index(backend) as index:
                index.drop()  # type: ignore[attr-defined]
        results["targets"][name] = figures
        f = figures
        print(
            f"{name}: load {load['seconds']:.1f}s; --resume {f['median_resume_s']:.2f}s, --resume --prune "
            f"{f['median_prune_s']:.2f}s ({f['ratio']:.2f}x; the first, removing {args.delete}: "
            f"{f['first_prune_s']:.2f}s); peak {f['peak_mib_resume']:.0f} / {f['peak_mib_prune']:.0f} MiB"
        )
        shutil.rmtree(images)  # the next target starts from the whole folder again
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
