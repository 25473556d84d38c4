"""What reading each indexed image at several input sizes (``index_scales``) buys a trained model:
R@1/5/10 on the object benchmark's pools (validation, test, shift, held-out words, held-out
objects) for each set of sizes, the shift split's share of test R@1, and the encoding cost.

Why: sizes outside the training range are the shift split's largest single cost
(docs/shift-parts); the several sizes turned out to help every pool alike, an ensemble of views
(docs/index-scales.md). The set is picked by validation R@1, not by the split it is meant to help.

    python -m bench.index_scales --model RUN/best --data DIR --scales 320 --scales 256,320,480 \\
        --out-dir docs/index-scales
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path
from typing import Any

from vsparta.bench.written import publish
from vsparta.model.cli_train import input_sizes
from vsparta.model.config_parts import SCALE_REGIONS

log = logging.getLogger("vsparta.bench.index_scales")

POOLS = ("val", "test", "shift", "heldout_words", "heldout_objects")


def measure(args: argparse.Namespace) -> dict[str, Any]:
    from vsparta.core.manifest import read_manifest
    from vsparta.model.encode import resolve_device
    from vsparta.model.evaluate import NATURAL, evaluate
    from vsparta.model.modeling import VisualSpartaModel
    from vsparta.scenes.object_ceiling import perfect_detector_recall

    records = {p: [r for r in read_manifest(args.data / f"{p}.jsonl") if r.captions] for p in POOLS}
    ceilings = {p: perfect_detector_recall(r) for p, r in records.items()}
    model = VisualSpartaModel.from_pretrained(str(args.model)).eval()
    device = resolve_device(args.device)
    rows = []
    for regions, scales in [(r, s) for r in args.regions for s in args.scales]:
        model.config.index_scales, model.config.index_scale_regions = list(scales), regions
        model.config.validate_options()  # a set the stem cannot read: one sentence, before any encoding
        recall, seconds, terms = {}, {}, {}
        for pool, recs in records.items():
            t0 = time.perf_counter()
            report = evaluate(recs, model, top_ns=(NATURAL,), ndcg_queries=1, time_queries=0, device=device)
            seconds[pool] = time.perf_counter() - t0
            row = next(r for r in report.rows if r["model"] != "random")
            recall[pool] = {k: float(v) for k, v in row["recall"][str(len(recs))].items()}
            terms[pool] = float(row["terms_per_image"])
            log.info("scales %s (%s) on %s: %s (%.0fs)", scales, regions, pool, recall[pool], seconds[pool])
        images = sum(len(r) for r in records.values())
        per_image = sum(seconds.values()) / images
        mean_terms = sum(terms[p] * len(records[p]) for p in POOLS) / images
        rows.append({"scales": list(scales), "regions": regions, "recall": recall,
                     "terms_per_image": mean_terms, "seconds_per_image": per_image})  # fmt: skip
    best = max(rows, key=lambda r: r["recall"]["val"]["R@1"])
    return {
        "model": str(args.model),
        "data": str(args.data),
        "device": str(device),
        "images": {p: len(r) for p, r in records.items()},
        "ceilings": ceilings,
        "rows": rows,
        "picked_by_validation": best["scales"],
        "picked_regions": best["regions"],
    }


def markdown(result: dict[str, Any], command: str) -> str:
    images = result["images"]
    lines = [
        "# Reading each image at several sizes (index_scales)",
        "",
        f"Command: `{command}`",
        "",
        f"Model `{result['model']}`; pools of `{result['data']}` ("
        + ", ".join(f"{p} {n}" for p, n in images.items())
        + " images). R@1 / R@5 / R@10 in % at natural sparsity; shift / test = the shift split's R@1 as a "
        "share of test R@1 (target >= 0.80); terms/img = terms an image keeps (the model's top-n cut), "
        "over all pools; s/image = encoding and scoring time per image on this machine "
        f"({result.get('device', 'cpu')}); picked = the best validation R@1.",
        "",
        "| index_scales | " + " | ".join(POOLS) + " | shift / test | terms/img | s/image |",
        "|---|" + "---|" * (len(POOLS) + 3),
        "| ambiguity ceiling (R@1) | "
        + " | ".join(f"{result['ceilings'][p]:.1f}" for p in POOLS)
        + " | - | - | - |",
    ]
    for row in result["rows"]:
        r = row["recall"]
        cells = [f"{r[p]['R@1']:.1f} / {r[p]['R@5']:.1f} / {r[p]['R@10']:.1f}" for p in POOLS]
        ratio = r["shift"]["R@1"] / r["test"]["R@1"] if r["test"]["R@1"] else float("nan")
        name = ",".join(str(s) for s in row["scales"])
        if len({r.get("regions", "pooled") for r in result["rows"]}) > 1:
            name += f" ({row['regions']})"
        picked = (result["picked_by_validation"], result.get("picked_regions"))
        if (row["scales"], row.get("regions")) == picked:
            name += " (picked)"
        tail = f" | {ratio:.2f} | {row['terms_per_image']:.0f} | {row['seconds_per_image']:.3f} |"
        lines.append(f"| {name} | " + " | ".join(cells) + tail)
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", type=Path, required=True, help="a trained VisualSparta model folder")
    p.add_argument(
        "--data", type=Path, required=True, help="object scenes with " + ", ".join(POOLS) + " manifests"
    )
    p.add_argument("--scales", type=input_sizes, action="append", required=True,
                   help="a set of input sizes, e.g. 256,320,480 (repeat for each set)")  # fmt: skip
    p.add_argument("--regions", nargs="+", choices=SCALE_REGIONS, default=["pooled"],
                   help="index_scale_regions to measure each set with (default pooled)")  # fmt: skip
    p.add_argument("--out-dir", type=Path, help="write index-scales.{md,json} here")
    p.add_argument("--device", default="auto", help="auto (CUDA when there is one), cpu or cuda")
    args = p.parse_args(argv)
    if not (args.model / "config.json").is_file():
        p.error(f"--model {args.model} is not a model folder (it has no config.json)")
    missing = [f"{pool}.jsonl" for pool in POOLS if not (args.data / f"{pool}.jsonl").is_file()]
    if missing:
        p.error(
            f"--data {args.data} lacks {', '.join(missing)} (make them with `vsparta scenes --kind objects`)"
        )
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return publish("index_scales", "index-scales", measure(args), markdown, argv, args.out_dir)


if __name__ == "__main__":
    sys.exit(main())
