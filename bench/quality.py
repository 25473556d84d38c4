"""``vsparta bench quality``: retrieval quality against index size, VisualSparta vs the dense baseline.

Generated scenes -> VisualSparta at each sparsity weight and the dense dual encoder, each trained
at every learning rate of a small sweep with early stopping on a validation pool the size of the
test pool (the best epoch of the best rate is kept) -> ``vsparta eval`` rows at n = 50, 100, 300,
1000, natural and all on the test pool -> ``docs/quality.md``, ``quality.json`` and ``quality.png``
(R@1 against terms per image, one line per model / regularizer weight).

On the object scenes every extra pool (held-out words, held-out objects and the shift split) has the
test pool's size unless ``--heldout`` says otherwise, and each is reported with its ambiguity
ceiling (``bench/quality_report.py``). A model with a frozen stem (a pretrained CNN) reads its
regions from feature caches shared by every run on the same scenes (``model.feature_cache``):
the stem runs once per image and view, not once per recipe and epoch.

The full run is meant for one GPU (``--config base``, MiniLM init, 10,000 train scenes); ``--quick``
is a CPU run of the tiny from-scratch recipe on a few hundred scenes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vsparta.bench.quality_data import checked_groups, features_folder, scenes
from vsparta.bench.quality_report import merge_runs, write

log = logging.getLogger(__name__)

QUICK: dict[str, Any] = {
    "train": 300,
    "val": 100,
    "test": 100,
    "size": 64,
    "epochs": 4,
    "config": "tiny",
    "init": "none",
    "lrs": "2e-3",  # one rate each: a CPU smoke run (the full run sweeps two)
    "dense_lrs": "1e-3",
    "weights": "0,3e-4,3e-3",
    "batch_size": 32,
}
FULL: dict[str, Any] = {
    "train": 10000,
    "val": 1000,
    "test": 1000,
    "size": 96,
    "epochs": 8,
    "config": "base",
    "init": None,  # MiniLM for the base config
    "lrs": "1e-4,2e-4",
    "dense_lrs": "5e-5,1e-4",
    "weights": "0,1e-3",
    "batch_size": 128,
}


def _floats(text: str) -> list[float]:
    try:
        values = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a comma list of numbers, got {text!r}") from None
    if not values or any(v < 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected non-negative numbers, got {text!r}")
    return values


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from vsparta.model.augment import Augmentation, zoom_range  # torch-free (PIL, numpy)

    parser.add_argument("--quick", action="store_true", help="CPU-sized run (tiny model, few hundred scenes)")
    for name in ("train", "val", "test", "size", "epochs", "batch_size"):
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, help=f"default: full {FULL[name]}")
    parser.add_argument("--config", help="model preset or JSON (default: full base, quick tiny)")
    parser.add_argument("--init", help="text model for the init, or 'none' (default: MiniLM for base)")
    parser.add_argument("--lrs", type=_floats, help="VisualSparta learning-rate sweep (comma list)")
    parser.add_argument("--dense-lrs", type=_floats, help="dense baseline learning-rate sweep")
    parser.add_argument("--weights", type=_floats, help="sparsity weights, one VisualSparta line each")
    parser.add_argument("--sparsity-loss", choices=["flops", "l1"], default="flops", help="FLOPS or L1")
    parser.add_argument("--sparsity-images", type=int, help="images per batch the regularizer sees")
    parser.add_argument("--sparsity-vocab", type=int, help="vocabulary ids sampled per regularizer step")
    parser.add_argument("--sparsity-target", type=float, help="steer towards this many positive terms/img")
    parser.add_argument("--term-bias", action="store_true", help="VisualSparta with a per-term bias")
    parser.add_argument("--no-dense", action="store_true", help="skip the dense baseline")
    parser.add_argument(
        "--no-sparta", action="store_true", help="skip VisualSparta (the dense baseline only)"
    )
    parser.add_argument(
        "--kind", choices=["shapes", "objects"], default="shapes", help="scene benchmark (default shapes)"
    )
    parser.add_argument(
        "--heldout", type=int, help="objects: images per held-out and shift pool (default: --test)"
    )
    recipe = parser.add_argument_group("recipe (model/recipe.py; every variant of the run)")
    recipe.add_argument("--pretrained-lr", type=float, help="rate of the parts copied from the text model")
    recipe.add_argument("--stem-lr", type=float, help="rate of a pretrained stem that is fine-tuned")
    recipe.add_argument("--fine-tune-stem", action="store_true", help="train a pretrained stem too")
    recipe.add_argument("--augment-views", type=int, default=1, help="fixed views per training image")
    recipe.add_argument(
        "--augment-scale", type=zoom_range, default=Augmentation.scale, metavar="LOW,HIGH",
        help="the augmented views' zoom range (model.augment)",
    )  # fmt: skip
    from vsparta.scenes.object_varied import TRAIN_LOOKS

    recipe.add_argument(
        "--train-look", choices=sorted(TRAIN_LOOKS), default="seen",
        help="objects: the training split's look (varied: half its backgrounds vivid, scenes.object_varied)",
    )  # fmt: skip
    parser.add_argument(
        "--groups",
        default="",
        help="objects: comma-separated Unicode emoji groups/subgroups to draw from (default: all 1,161 "
        "objects; the demo's four subgroups let a CPU-sized model see each object dozens of times)",
    )
    parser.add_argument(
        "--merge", type=Path, nargs="+", help="no training: one table and plot from these runs' quality.json"
    )
    parser.add_argument(
        "--trained",
        type=Path,
        help="no training: evaluate this saved model (a run's final/ folder) as the run's one variant",
    )
    parser.add_argument("--patience", type=int, default=3, help="early stopping: epochs without gain")
    parser.add_argument("--seed", type=int, default=0, help="seed of the scenes and the trainings")
    parser.add_argument("--device", default="auto", help="auto (CUDA if available), cpu, cuda ...")
    parser.add_argument("--threads", type=int, help="torch CPU threads")
    parser.add_argument(
        "--cache-dir", type=Path, default=Path(".cache/bench/quality"), help="scenes and trained models"
    )
    parser.add_argument("--out-dir", type=Path, default=Path("docs"), help="quality.md/.png/.json go here")
    parser.add_argument("--no-write", action="store_true", help="print only")


@dataclass
class Variant:
    """One line of the plot: a model kind with its config overrides, trained at each rate of ``lrs``."""

    name: str
    model: str
    lrs: list[float]
    overrides: dict[str, Any] = field(default_factory=dict)


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    preset = QUICK if args.quick else FULL
    out = {k: getattr(args, k, None) for k in preset}
    out = {k: (preset[k] if v is None else v) for k, v in out.items()}
    for key in ("lrs", "dense_lrs", "weights"):
        if isinstance(out[key], str):
            out[key] = _floats(out[key])
    return out


def variants(s: dict[str, Any], args: argparse.Namespace) -> list[Variant]:
    out = []
    for w in [] if args.no_sparta else s["weights"]:
        overrides: dict[str, Any] = {"sparsity_weight": w, "sparsity_loss": args.sparsity_loss}
        for key in ("sparsity_images", "sparsity_vocab", "sparsity_target"):
            if getattr(args, key, None):
                overrides[key] = getattr(args, key)
        if args.term_bias:
            overrides["phi_term_bias"] = True
        label = "paper recipe" if w == 0 else f"{args.sparsity_loss} {w:g}"
        label += " + term bias" if args.term_bias else ""
        label += f", target {args.sparsity_target:g}" if w and args.sparsity_target else ""
        out.append(Variant(f"VisualSparta ({label})", "visualsparta", s["lrs"], overrides))
    if not args.no_dense:
        out.append(Variant("dense", "dense", s["dense_lrs"]))
    return out


def train_variant(
    v: Variant, s: dict[str, Any], manifests: dict[str, Path], args: argparse.Namespace, work: Path
) -> dict[str, Any]:
    """Every rate of the sweep with early stopping; returns the best (by validation R@1+R@5+R@10)."""
    from vsparta.model.augment import Augmentation
    from vsparta.model.train import TrainOptions, train

    # runs resume from their folder: two recipes (say tiny and MiniLM) at one rate must not share one
    options = [args.pretrained_lr, args.stem_lr, args.fine_tune_stem, args.augment_views]
    if tuple(args.augment_scale) != Augmentation.scale:  # runs of the default range keep their folders
        options.append(list(args.augment_scale))
    recipe = hashlib.sha1(
        json.dumps([s["config"], s["init"], s["batch_size"], str(manifests["train"]), *options]).encode()
    ).hexdigest()[:8]
    stem_overrides = {"freeze_stem": False} if args.fine_tune_stem else {}
    runs = []
    for lr in v.lrs:
        out = (
            work
            / f"{v.model}-{'-'.join(f'{k}={x}' for k, x in sorted(v.overrides.items()))}-lr{lr:g}-{recipe}"
        )
        opts = TrainOptions(
            manifest=str(manifests["train"]),
            out=str(out),
            val=str(manifests["val"]),
            model=v.model,
            init=s["init"],
            config=s["config"],
            epochs=s["epochs"],
            batch_size=s["batch_size"],
            lr=lr,
            pretrained_lr=args.pretrained_lr,
            stem_lr=args.stem_lr,
            augment_views=args.augment_views,
            augment_scale=tuple(args.augment_scale),
            feature_cache=str(features_folder(manifests["train"], s, args, "")),
            seed=args.seed,
            device=args.device,
            progress=False,
            keep_best=True,
            patience=args.patience,
            overrides=(v.overrides if v.model == "visualsparta" else {}) | stem_overrides,
            resume=True,
        )
        r = train(opts)
        best = r.best_epoch or len(r.val)
        runs.append(
            {
                "lr": lr,
                "seconds": round(r.seconds, 1),
                "best_epoch": best,
                "epochs_run": len(r.epoch_losses),
                "val": r.val[best - 1] if r.val else {},
                "positive_terms_during_training": r.epoch_positive_terms,
                "dir": str(r.final_dir),
            }
        )
        log.info("%s lr %g: val %s at epoch %d (%.0fs)", v.name, lr, runs[-1]["val"], best, r.seconds)
    return max(runs, key=lambda run: sum(run["val"].values()) if run["val"] else -1.0) | {"sweep": runs}


def _recipe(args: argparse.Namespace) -> dict[str, Any]:
    """The recipe options of a run, as its settings record them (the report names them)."""
    keys = ("pretrained_lr", "stem_lr", "fine_tune_stem", "augment_views", "augment_scale", "train_look")
    return {k: getattr(args, k) for k in keys}


def trained_run(path: Path) -> dict[str, Any]:
    """A model trained before (``path``: its run's ``final/``), as ``train_variant`` reports a run:
    the run's ``train_log.json`` gives its rate, best epoch, validation recall and time."""
    from vsparta.core.errors import UsageError

    log_file = path.parent / "train_log.json"
    if not (path / "config.json").is_file() or not log_file.is_file():
        raise UsageError(
            f"--trained {path}: not a trained run's model folder (config.json, ../train_log.json)"
        )
    record = json.loads(log_file.read_text(encoding="utf-8"))
    best = record.get("best_epoch") or len(record["epoch_losses"])
    run = {
        "lr": record["options"]["lr"],
        "seconds": record.get("seconds"),
        "best_epoch": best,
        "epochs_run": len(record["epoch_losses"]),
        "val": record["val"][best - 1] if record.get("val") else {},
        "positive_terms_during_training": record["epoch_positive_terms"],
        "dir": str(path),
    }
    return run | {"sweep": [dict(run)]}


def _evaluate(
    model: Any, kind: str, records: list[Any], top_ns: Any, args: argparse.Namespace, features: Path
) -> list[Any]:
    from vsparta.model.encode import resolve_device
    from vsparta.model.evaluate import evaluate

    device = resolve_device(args.device)
    report = evaluate(
        records,
        model if kind == "visualsparta" else None,
        model if kind == "dense" else None,
        top_ns=top_ns,
        device=device,
        amp=device.type == "cuda",
        ndcg_queries=min(1000, len(records)),
        time_queries=100,
        seed=args.seed,
        feature_cache=features,
    )
    return [r for r in report.rows if r["model"] != "random"]


def run(args: argparse.Namespace) -> int:
    import torch

    from vsparta.bench import hardware
    from vsparta.bench.options import command_line
    from vsparta.core.errors import UsageError
    from vsparta.core.manifest import read_manifest
    from vsparta.model.dense import load_model
    from vsparta.model.evaluate import NATURAL, TOP_N
    from vsparta.scenes.object_ceiling import perfect_detector_recall

    if args.merge:
        return write(*merge_runs(args.merge), args)
    if args.threads:
        torch.set_num_threads(args.threads)
    s = _settings(args)
    t0 = time.perf_counter()
    groups = checked_groups(args)
    manifests = scenes(s, args, groups)
    test = read_manifest(manifests["test"])
    held = {k: read_manifest(p) for k, p in manifests.items() if k.startswith("heldout") or k == "shift"}
    features = {k: features_folder(p, s, args, pool=k) for k, p in manifests.items()}
    pools = {"test": test, **held}
    ceilings = {k: perfect_detector_recall(r) for k, r in pools.items()} if args.kind == "objects" else {}
    results = []
    chosen = variants(s, args)
    if args.trained and len(chosen) != 1:
        raise UsageError("--trained evaluates one model: give one --weights and --no-dense, or --no-sparta")
    for v in chosen:
        best = (
            trained_run(args.trained)
            if args.trained
            else train_variant(v, s, manifests, args, args.cache_dir / "runs")
        )
        model = load_model(best["dir"])
        rows = _evaluate(model, v.model, test, TOP_N, args, features["test"])
        heldout = {k: _evaluate(model, v.model, r, (NATURAL,), args, features[k])[0] for k, r in held.items()}
        results.append(
            {
                "variant": v.name,
                "model": v.model,
                "overrides": v.overrides,
                **best,
                "rows": rows,
                "heldout": heldout,
                "ceilings": ceilings,
            }
        )
    meta = {
        "command": command_line("quality"),
        "hardware": hardware.describe(),
        "device": args.device,
        "settings": s | {"kind": args.kind, "groups": list(groups)} | _recipe(args),
        "seconds": round(time.perf_counter() - t0, 1),
        "pool": str(len(test)),
    }
    return write(results, meta, args)
