"""What the frozen stem's feature cache saves: a training step with the stem run on the batch's
pixels against the same step reading the cache (``model.feature_cache``), and the cache's own cost;
beside them, a step that fine-tunes the stem (what ``--fine-tune-stem`` costs).

Both kinds of step run in one process on the same batches, alternating (the machine is shared: a
noisy minute hits both), after the pixels are decoded into memory (what an uncached run holds
from its second epoch on). The per-step medians give an epoch of ``--train-images`` images each
way; the cache is built once, so over E epochs the saving is E uncached epochs against one build
plus E cached epochs. Writes ``feature-cache.md`` and ``feature-cache.json``.

    python -m bench.feature_cache --manifest TRAIN.jsonl --config JSON --images 640 --steps 15 \\
        --epochs 12 --threads 1 --out-dir docs/feature-cache
"""

from __future__ import annotations

import argparse
import logging
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from vsparta.bench.written import write_report

log = logging.getLogger("vsparta.bench.feature_cache")


def _timed_step(model: Any, store: Any, indices: list[int], optimizer: Any, regularizer: Any) -> float:
    from vsparta.model.data import make_batch
    from vsparta.model.train import step_losses

    t0 = time.perf_counter()
    batch = make_batch(store, indices, 5, np.random.default_rng(0))
    _, total, _ = step_losses(model, batch, regularizer, 0, model.device, amp=False)
    optimizer.zero_grad(set_to_none=True)
    total.backward()
    optimizer.step()
    return time.perf_counter() - t0


def measure(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from vsparta.bench import hardware
    from vsparta.core.manifest import read_manifest
    from vsparta.model.augment import Augmentation
    from vsparta.model.data import ImageStore
    from vsparta.model.feature_cache import attach
    from vsparta.model.modeling import build_model
    from vsparta.model.recipe import freeze, parameter_groups, train_mode
    from vsparta.model.sparsity import SparsityRegularizer
    from vsparta.model.train import make_config

    torch.set_num_threads(args.threads)
    model = build_model(make_config("visualsparta", args.config, None))
    if freeze(model) is None:
        raise ValueError("the config's stem trains: only a frozen stem is cached (give a pretrained stem)")
    train_mode(model)
    records = read_manifest(args.manifest)[: args.images]
    tokenize = model.query_tokenizer().tokenize
    pixels = ImageStore(records, model.config, tokenize, cache=True)
    cached = ImageStore(records, model.config, tokenize, augmentation=Augmentation(views=args.views))
    with tempfile.TemporaryDirectory() as folder:
        t0 = time.perf_counter()
        attach(cached, model, Path(folder) / "cache", progress=False)
        build_s = time.perf_counter() - t0
        for i in range(len(records)):
            pixels.pixels(i)  # decoded once, as an uncached run holds them after its first epoch
        tuned = build_model(make_config("visualsparta", args.config, None, {"freeze_stem": False}))
        train_mode(tuned)  # the same network, its stem trained too (at its own rate)
        runs = {  # name: (model, where its regions come from, optimizer)
            "stem": (model, pixels, torch.optim.AdamW(parameter_groups(model, 1e-4))),
            "cache": (model, cached, torch.optim.AdamW(parameter_groups(model, 1e-4))),
            "fine-tune": (tuned, pixels, torch.optim.AdamW(parameter_groups(tuned, 1e-4, stem_lr=1e-5))),
        }
        regularizer = SparsityRegularizer.for_model(model, 1000, torch.device("cpu"))
        order = np.random.default_rng(0).permutation(len(records))
        times: dict[str, list[float]] = {name: [] for name in runs}
        for k in range(args.steps):
            indices = [int(i) for i in order[(k * args.batch_size) % len(records) :][: args.batch_size]]
            names = list(runs)[k % 3 :] + list(runs)[: k % 3]  # each first in turn
            for name in names:
                m, store, optimizer = runs[name]
                times[name].append(_timed_step(m, store, indices, optimizer, regularizer))
    step = {name: statistics.median(t[1:] or t) for name, t in times.items()}  # the first step warms up
    steps_per_epoch = args.train_images // args.batch_size
    epoch = {name: s * steps_per_epoch for name, s in step.items()}
    build_full = build_s / len(records) * args.train_images  # all views of every image
    return {
        "command": "python -m bench.feature_cache " + shlex.join(args.argv),
        "hardware": hardware.describe(),
        "config": args.config,
        "images_measured": len(records),
        "views": args.views,
        "train_images": args.train_images,
        "epochs": args.epochs,
        "step_s": step,
        "epoch_s": epoch,
        "cache_build_s": build_full,
        "cache_views_per_s": len(records) * args.views / build_s,
        "speedup_per_epoch": epoch["stem"] / epoch["cache"],
        "speedup_over_run": args.epochs * epoch["stem"] / (build_full + args.epochs * epoch["cache"]),
    }


def markdown(r: dict[str, Any]) -> str:
    e, n = r["epochs"], r["train_images"]
    return "\n".join(
        [
            "# The frozen stem's feature cache",
            "",
            f"Command: `{r['command']}`  ",
            f"Machine: {r['hardware']['cpu']}, {r['hardware']['cores']} cores (shared).  ",
            f"Config: `{r['config']}`; {r['images_measured']} images measured, figures for {n:,} "
            f"training images, {r['views']} view(s) each, and {e} epochs.",
            "",
            "| | per step (median) | one epoch | building the cache | the whole run |",
            "|---|---|---|---|---|",
            f"| stem on every batch | {r['step_s']['stem']:.3f} s | {r['epoch_s']['stem']:.0f} s | - | "
            f"{e * r['epoch_s']['stem']:.0f} s |",
            f"| stem fine-tuned (its gradients too) | {r['step_s']['fine-tune']:.3f} s | "
            f"{r['epoch_s']['fine-tune']:.0f} s | - | {e * r['epoch_s']['fine-tune']:.0f} s |",
            f"| regions from the cache | {r['step_s']['cache']:.3f} s | {r['epoch_s']['cache']:.0f} s | "
            f"{r['cache_build_s']:.0f} s ({r['cache_views_per_s']:.0f} views/s) | "
            f"{r['cache_build_s'] + e * r['epoch_s']['cache']:.0f} s |",
            "",
            f"An epoch from the cache is **{r['speedup_per_epoch']:.1f}x** faster; over {e} epochs, the "
            f"build included, the run is **{r['speedup_over_run']:.1f}x** faster.",
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--manifest", type=Path, required=True, help="training manifest (JSONL)")
    p.add_argument("--config", required=True, help="a config with a frozen stem (JSON or a preset)")
    p.add_argument("--images", type=int, default=640, help="images measured (default 640)")
    p.add_argument("--train-images", type=int, default=16000, help="training set the epoch figures are for")
    p.add_argument("--epochs", type=int, default=12, help="epochs of the run figure (default 12)")
    p.add_argument("--views", type=int, default=1, help="views per image in the cache (its build cost)")
    p.add_argument("--steps", type=int, default=15, help="timed steps each way (default 15)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out-dir", type=Path, help="write feature-cache.{md,json} here")
    args = p.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else argv
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not args.manifest.is_file():
        p.error(f"{args.manifest}: no such manifest")
    try:
        result = measure(args)
    except ValueError as exc:
        print(f"feature_cache: {exc}", file=sys.stderr)  # noqa: T201 - the command's output
        return 2
    text = markdown(result)
    print(text)  # noqa: T201 - the command's output
    write_report(args.out_dir, "feature-cache", text, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
