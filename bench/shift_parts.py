"""What each change of the shift split costs a model: the test pool, the shift split, and one pool per
change made alone (object sizes, angles, shadows, backgrounds, caption frames), all of one size.

Why: the shift split changes five things at once (``scenes/object_shift.py``); a model that loses
half its recall there may lose it to one of them. Each pool is drawn from the same seeds as the
shift split, with one change; R@1 at natural sparsity is reported beside each pool's ambiguity
ceiling, and as a share of the model's test R@1.

    python -m bench.shift_parts --model lite0=RUN/final --model scratch=RUN2/final --size 224 \\
        --images 1000 --cache-dir DIR --out-dir docs/shift-parts
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from vsparta.bench.options import add_models_argument
from vsparta.bench.written import publish

log = logging.getLogger("vsparta.bench.shift_parts")

CHANGES = ("sizes", "angles", "shadow", "background", "templates")


def pools(cache: Path, size: int, images: int, seed: int) -> dict[str, Path]:
    """The test pool, the shift split and one shift pool per change alone, generated once each."""
    from vsparta.scenes.object_shift import ShiftStyle
    from vsparta.scenes.objects import generate_object_scenes

    styles = {"shift": ShiftStyle()}
    styles |= {f"only {c}": ShiftStyle(**{k: k == c for k in CHANGES}) for c in CHANGES}
    out = {"test": cache / f"parts-{size}-{images}-{seed}" / "test" / "test.jsonl"}
    if not out["test"].exists():
        generate_object_scenes(
            out["test"].parent, {"test": images}, image_size=size, seed=seed, progress=False
        )
    for name, style in styles.items():
        folder = cache / f"parts-{size}-{images}-{seed}" / name.replace(" ", "-")
        out[name] = folder / "shift.jsonl"
        if not out[name].exists():
            generate_object_scenes(
                folder, {"shift": images}, image_size=size, seed=seed, progress=False, shift=style
            )
    return out


def measure(args: argparse.Namespace) -> dict[str, Any]:
    from vsparta.core.manifest import read_manifest
    from vsparta.model.dense import load_model
    from vsparta.model.evaluate import NATURAL, evaluate
    from vsparta.scenes.object_ceiling import perfect_detector_recall

    manifests = pools(args.cache_dir, args.size, args.images, args.seed)
    records = {name: read_manifest(path) for name, path in manifests.items()}
    ceilings = {name: perfect_detector_recall(r) for name, r in records.items()}
    rows = []
    for name, path in args.model:
        model = load_model(path)
        dense = model if model.config.model_type == "visualsparta_dense" else None
        r1 = {}
        for pool, recs in records.items():
            cache = args.cache_dir / f"parts-{args.size}-{args.images}-{args.seed}" / "features" / name / pool
            report = evaluate(recs, None if dense else model, dense, top_ns=(NATURAL,), ndcg_queries=1,
                              time_queries=0, feature_cache=cache)  # fmt: skip
            row = next(r for r in report.rows if r["model"] != "random")
            r1[pool] = float(row["recall"][str(len(recs))]["R@1"])
            log.info("%s on %s: R@1 %.1f", name, pool, r1[pool])
        rows.append({"model": name, "path": str(path), "r1": r1})
    return {"images": args.images, "size": args.size, "seed": args.seed, "ceilings": ceilings, "rows": rows}


def markdown(result: dict[str, Any], command: str) -> str:
    names = list(result["ceilings"])
    lines = [
        "# What each change of the shift split costs",
        "",
        f"Command: `{command}`",
        "",
        f"R@1 in % on pools of {result['images']} images drawn at {result['size']} px: the test pool, the "
        "shift split (every change), then the shift split with one change alone (the rest as in "
        "training). In brackets: the share of the model's test R@1.",
        "",
        "| model | " + " | ".join(names) + " |",
        "|---|" + "---|" * len(names),
        "| ambiguity ceiling | " + " | ".join(f"{result['ceilings'][n]:.1f}" for n in names) + " |",
    ]
    for row in result["rows"]:
        test = row["r1"]["test"] or float("nan")
        cells = [
            f"{row['r1'][n]:.1f}" + ("" if n == "test" else f" ({row['r1'][n] / test:.2f})") for n in names
        ]
        lines.append(f"| {row['model']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_models_argument(p)
    p.add_argument("--size", type=int, default=224, help="scene side in pixels (default 224)")
    p.add_argument("--images", type=int, default=1000, help="images per pool (default 1000)")
    p.add_argument("--seed", type=int, default=0, help="seed of the scenes (default 0)")
    p.add_argument(
        "--cache-dir", type=Path, default=Path(".cache/bench/shift-parts"), help="pools and caches"
    )
    p.add_argument("--out-dir", type=Path, help="write shift-parts.{md,json} here")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    result = measure(args)
    return publish("shift_parts", "shift-parts", result, markdown, argv, args.out_dir)


if __name__ == "__main__":
    sys.exit(main())
