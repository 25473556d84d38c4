"""`vsparta scenes`: write the generated scene benchmark (images + train/val/test manifests)."""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path

log = logging.getLogger(__name__)


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, required=True, help="output folder (created if missing)")
    parser.add_argument("--train", type=_non_negative, default=2000, help="training images (default 2000)")
    parser.add_argument("--val", type=_non_negative, default=200, help="validation images (default 200)")
    parser.add_argument("--test", type=_non_negative, default=500, help="test images (default 500)")
    parser.add_argument("--size", type=int, default=96, help="image side in pixels, 32-1024 (default 96)")
    parser.add_argument("--seed", type=_non_negative, default=0, help="same seed, same bytes (default 0)")
    parser.add_argument(
        "--progress", action=argparse.BooleanOptionalAction, default=True, help="progress bar (default: on)"
    )


def run(args: argparse.Namespace) -> int:
    from vsparta.scenes import generate_scenes

    start = time.perf_counter()
    try:
        manifests = generate_scenes(
            args.out,
            n_train=args.train,
            n_val=args.val,
            n_test=args.test,
            image_size=args.size,
            seed=args.seed,
            progress=args.progress,
        )
    except ValueError as exc:
        log.error("%s", exc)
        return 2
    total = args.train + args.val + args.test
    took = time.perf_counter() - start
    rate = total / took if took > 0 else float("inf")
    log.info("wrote %d images in %.1f s (%.0f images/s) under %s", total, took, rate, args.out)
    for split, path in manifests.items():
        log.info("  %s: %s", split, path)
    return 0
