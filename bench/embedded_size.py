"""How big the embedded engine's index is for a model's documents: bytes per image and per term.

    python -m bench.model_shaped EXPORT --tokenizer MODEL --out /tmp/profile.npz
    python -m bench.embedded_size /tmp/profile.npz --docs 1000000

``--docs`` images are sampled from a model-shaped profile (``bench.model_shaped``) and loaded the
way ``vsparta index`` loads them (``upsert_arrays`` in slices, inside ``bulk_load``, so the index
ends as one segment). Why a profile and not the real documents: size per image depends on the
index size (dense runs for frequent terms, per-block offsets), so it is measured at the size a
user would run.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

from vsparta.bench.hardware import write_result
from vsparta.bench.model_shaped import load_or_generate
from vsparta.termindex.embedded.index import EmbeddedIndex

SLICE = 10_000  # documents per upsert_arrays call


def measure(profile: Path, n_docs: int, cache_dir: Path, work_dir: Path) -> dict:
    corpus = load_or_generate(profile, n_docs, cache_dir)
    root = work_dir / "index"
    shutil.rmtree(root, ignore_errors=True)
    start = time.perf_counter()
    with EmbeddedIndex(root, create=True) as index, index.bulk_load():
        corpus.upsert_into(index, SLICE)
    with EmbeddedIndex(root) as index:
        stats = index.stats()
    return {
        "profile": str(profile),
        "images": n_docs,
        "terms_per_image": corpus.nnz / n_docs,
        "bytes_per_image": stats["bytes_on_disk"] / n_docs,
        "bytes_per_term": stats["bytes_per_posting"],
        "segments": stats["segments"],
        "load_seconds": time.perf_counter() - start,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("profile", type=Path, help="a model-shaped profile (.npz, python -m bench.model_shaped)")
    p.add_argument("--docs", type=int, default=100_000, help="images to sample and index (default 100000)")
    p.add_argument("--cache-dir", type=Path, default=Path(tempfile.gettempdir()) / "vsparta-bench")
    p.add_argument("--json", type=Path, help="write the figures here")
    args = p.parse_args(argv)
    if not args.profile.exists():
        print(f"error: {args.profile} does not exist", file=sys.stderr)
        return 2
    if args.docs < 1:
        print(f"error: --docs must be >= 1, got {args.docs}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        res = measure(args.profile, args.docs, args.cache_dir, Path(tmp))
    print(
        f"{res['images']} images, {res['terms_per_image']:.1f} terms/image: {res['bytes_per_image']:.1f} "
        f"bytes/image, {res['bytes_per_term']:.2f} bytes/term ({res['segments']} segment, "
        f"loaded in {res['load_seconds']:.0f} s)"
    )
    if args.json:
        write_result(args.json, res, "embedded_size", argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
