"""Study: does aligning the frozen stem's batch-norm statistics to the indexed collection recover the
shift split's recall? (docs/shift-small-objects.md, section "Batch norms aligned to the collection")

Why: the shift split changes a picture's whole look (backgrounds, sizes, shadows), and every layer
of the frozen EfficientNet-Lite0 normalises its inputs with ImageNet's statistics, whatever the
collection. AdaBN (Li et al., 2016) re-estimates those statistics on the target domain. Our model
was trained on features of the generator's scenes under ImageNet's statistics, so the alignment
here maps each layer's input on the collection onto the training scenes' distribution of it before
ImageNet's batch norm applies: per channel, ``(x - mu_c) / sd_c * sd_t + mu_t``, folded into the
batch norm's running statistics. No weight is retrained; an indexer sees every picture of its
collection, so the statistics come from pictures of the collection (not its captions).

    .venv/bin/python docs/bn-align/bn_align.py RUN/best SCENES docs/bn-align --layers 0 1 9 15

Each pool is read as trained (ImageNet's statistics), then aligned on a random sample of the pool's
own pictures, every batch norm or only the first N; R@1/5/10 at natural sparsity, the shift
split's share of test.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch import nn

from vsparta.core.manifest import read_manifest
from vsparta.model.evaluate import NATURAL, evaluate
from vsparta.model.modeling import VisualSpartaModel
from vsparta.model.preprocess import ImagePreprocessor

POOLS = ("val", "test", "shift", "heldout_words", "heldout_objects")
BATCH = 64


def pixels(model: VisualSpartaModel, records: list, n: int, seed: int) -> torch.Tensor:
    """``n`` of the records' pictures, drawn at random, as the stem reads them."""
    pick = np.random.default_rng(seed).permutation(len(records))[:n]
    pre = ImagePreprocessor.from_config(model.config)
    return torch.from_numpy(pre.batch([Image.open(records[i].image) for i in sorted(pick)]))


def batch_norms(model: VisualSpartaModel) -> list[nn.BatchNorm2d]:
    return [m for m in model.image.stem.backbone.modules() if isinstance(m, nn.BatchNorm2d)]


@torch.no_grad()
def input_moments(model: VisualSpartaModel, px: torch.Tensor, then=None) -> list:
    """Each batch norm's input mean and variance per channel over ``px`` (an unfolded forward, so
    the batch norms run as modules and their hooks fire). ``then(i, bn, mean, var)``, when given,
    runs in the hook before batch norm ``i`` applies, on the whole of ``px`` in one batch, so what
    it changes reaches the layers after it."""
    bns = batch_norms(model)
    sums = [[0.0, 0.0, 0] for _ in bns]

    def hook(i: int):
        def record(module: nn.Module, args: tuple) -> None:
            x = args[0].double()
            sums[i][0] = sums[i][0] + x.sum((0, 2, 3))
            sums[i][1] = sums[i][1] + (x * x).sum((0, 2, 3))
            sums[i][2] += x.shape[0] * x.shape[2] * x.shape[3]
            if then is not None:
                then(i, module, *moments_of(sums[i]))

        return record

    handles = [bn.register_forward_pre_hook(hook(i)) for i, bn in enumerate(bns)]
    backbone = model.image.stem.backbone
    step = len(px) if then is not None else BATCH
    try:
        backbone.train()  # the unfolded path; the batch norms themselves stay in eval
        for bn in bns:
            bn.eval()
        for start in range(0, len(px), step):
            backbone(px[start : start + step], model.image.stem.blocks)
    finally:
        backbone.eval()
        for h in handles:
            h.remove()
    return [moments_of(s) for s in sums]


def moments_of(sums: list) -> tuple[torch.Tensor, torch.Tensor]:
    s, ss, count = sums
    mean = s / count
    return mean.float(), (ss / count - mean * mean).clamp_min(0).float()


def align(
    model: VisualSpartaModel,
    target: list,
    collection: torch.Tensor,
    imagenet: list,
    layers: int | None = None,
) -> None:
    """Set each batch norm so that the collection's input, standardised by its own moments and given
    the training scenes' (``target``), meets ImageNet's statistics; layer by layer in one forward,
    since each layer's input depends on the alignment of the layers before it. ``layers``: only the
    first ones (the low-level colour and texture statistics); the rest keep ImageNet's."""

    def set_stats(i: int, bn: nn.BatchNorm2d, mean: torch.Tensor, var: torch.Tensor) -> None:
        if layers is not None and i >= layers:
            return
        (t_mean, t_var), (i_mean, i_var) = target[i], imagenet[i]
        ratio = (var + bn.eps) / (t_var + bn.eps)  # the collection's spread over the training scenes'
        bn.running_mean.copy_(mean + (i_mean - t_mean) * ratio.sqrt())
        bn.running_var.copy_((i_var + bn.eps) * ratio - bn.eps)

    input_moments(model, collection, then=set_stats)


def restore(model: VisualSpartaModel, imagenet: list) -> None:
    for bn, (mean, var) in zip(batch_norms(model), imagenet, strict=True):
        bn.running_mean.copy_(mean)
        bn.running_var.copy_(var)


def recall(model: VisualSpartaModel, records: list) -> dict[str, float]:
    report = evaluate(records, model, top_ns=(NATURAL,), ndcg_queries=1, time_queries=0)
    row = next(r for r in report.rows if r["model"] != "random")
    return {k: float(v) for k, v in row["recall"][str(len(records))].items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model", type=Path, help="a trained model folder (a frozen efficientnet_lite0 stem)")
    p.add_argument("data", type=Path, help="object scenes with train and pool manifests")
    p.add_argument("out", type=Path, help="write bn-align.{md,json} here")
    p.add_argument("--sample", type=int, default=256, help="pictures the moments are taken over")
    p.add_argument("--layers", type=int, nargs="+", default=[0],
                   help="align the first N batch norms (0: all); one row per value")  # fmt: skip
    p.add_argument("--pools", nargs="+", default=list(POOLS), choices=POOLS)
    args = p.parse_args()
    torch.set_num_threads(2)
    model = VisualSpartaModel.from_pretrained(str(args.model)).eval()
    imagenet = [(bn.running_mean.clone(), bn.running_var.clone()) for bn in batch_norms(model)]
    train = list(read_manifest(args.data / "train.jsonl"))
    t0 = time.perf_counter()
    target = input_moments(model, pixels(model, train, args.sample, 0))
    print(
        f"training scenes' moments from {args.sample} pictures: {time.perf_counter() - t0:.0f}s", flush=True
    )
    records = {p: [r for r in read_manifest(args.data / f"{p}.jsonl") if r.captions] for p in args.pools}
    names = {n: f"aligned on the pool, {'every' if n == 0 else f'the first {n}'} batch norm{'s' * (n != 1)}"
             for n in args.layers}  # fmt: skip
    rows: dict[str, dict[str, dict[str, float]]] = {"as trained": {}} | {name: {} for name in names.values()}
    for pool, recs in records.items():
        restore(model, imagenet)
        rows["as trained"][pool] = recall(model, recs)
        sample = pixels(model, recs, args.sample, 1)
        for n, name in names.items():
            restore(model, imagenet)
            align(model, target, sample, imagenet, n or None)
            rows[name][pool] = recall(model, recs)
        print(pool, {k: v[pool]["R@1"] for k, v in rows.items()}, flush=True)
    restore(model, imagenet)
    args.out.mkdir(parents=True, exist_ok=True)
    result = {"model": str(args.model), "data": str(args.data), "sample": args.sample,
              "batch_norms": len(imagenet), "rows": rows}  # fmt: skip
    (args.out / "bn-align.json").write_text(json.dumps(result, indent=1))
    pools = list(records)
    lines = [
        "| R@1 / R@5 / R@10 | " + " | ".join(pools) + " | shift / test |",
        "|---|" + "---|" * (len(pools) + 1),
    ]
    for name, row in rows.items():
        cells = [f"{row[p]['R@1']:.1f} / {row[p]['R@5']:.1f} / {row[p]['R@10']:.1f}" for p in pools]
        share = f"{row['shift']['R@1'] / row['test']['R@1']:.2f}" if {"shift", "test"} <= set(row) else "-"
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {share} |")
    (args.out / "bn-align.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
