"""Training loop: in-batch negatives cross-entropy (paper Eq. 13) for VisualSparta or the dense baseline.

Reproducible on CPU: the image order and caption choice of an epoch are functions of (seed, epoch),
and the torch RNG (dropout) is saved with every checkpoint, so ``resume`` continues exactly.
"""

from __future__ import annotations

import json
import logging
import math
import random
import re
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from vsparta.core.karpathy import load_records
from vsparta.core.manifest import ManifestRecord
from vsparta.core.progress import progress_bar, quiet_library_bars
from vsparta.model.augment import Augmentation
from vsparta.model.config_parts import defaults
from vsparta.model.configuration import PRESETS, VisualSpartaConfig, config_from_spec
from vsparta.model.data import ImageStore, epoch_order, make_batch
from vsparta.model.dense import MODEL_CLASSES, DenseConfig
from vsparta.model.encode import autocast_for, resolve_device
from vsparta.model.feature_cache import attach
from vsparta.model.modeling import build_model
from vsparta.model.presence import presence_penalty
from vsparta.model.recipe import freeze, parameter_groups, train_mode, warmup_then_decay
from vsparta.model.sparsity import SparsityRegularizer
from vsparta.model.text_init import text_model_dimensions
from vsparta.model.tokenization import load_tokenizer

log = logging.getLogger(__name__)

TRAINER_STATE = "trainer_state.pt"
BEST = "best"  # the model of the best validation epoch (keep_best)
_CKPT = re.compile(r"^checkpoint-epoch-(\d+)$")


@dataclass
class TrainOptions:
    manifest: str
    out: str
    val: str | None = None
    model: str = "visualsparta"  # or "dense"
    init: str | None = None  # hub id / path / "none"; None = MiniLM for the "base" config, else none
    config: str = "tiny"
    epochs: int = 3
    batch_size: int = 32
    lr: float = 5e-5  # new parts (all of a model trained from scratch); model.recipe
    pretrained_lr: float | None = None  # parts copied from a text model (None: lr)
    stem_lr: float | None = None  # a pretrained stem that is fine-tuned (None: pretrained_lr)
    augment_views: int = 1  # fixed views per training image (model.augment); 1 = no augmentation
    augment_scale: tuple[float, float] = Augmentation.scale  # the views' zoom range (model.augment)
    feature_cache: str | None = None  # a frozen stem's region cache (default OUT/feature-cache)
    warmup: float = 0.1  # fraction of all steps with a linear warm-up
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    captions_per_image: int = 5
    seed: int = 0
    device: str = "auto"
    amp: bool | None = None
    resume: bool = False
    max_images: int | None = None
    image_root: str | None = None  # for a Karpathy-split .json instead of a manifest
    progress: bool = True
    keep_best: bool = False  # with val: `final` is the epoch with the best validation R@1+R@5+R@10
    patience: int | None = None  # with val: stop after this many epochs without improvement
    overrides: dict[str, Any] = field(default_factory=dict)  # config fields set on a fresh model


@dataclass
class TrainResult:
    final_dir: Path
    losses: list[float] = field(default_factory=list)  # one per step
    epoch_losses: list[float] = field(default_factory=list)  # the ranking loss (Eq. 13) alone
    val: list[dict[str, float]] = field(default_factory=list)
    seconds: float = 0.0
    epoch_penalties: list[float] = field(default_factory=list)  # weighted sparsity penalty, per epoch
    epoch_positive_terms: list[float] = field(default_factory=list)  # mean positive φ per image
    best_epoch: int | None = None


def _config_fields() -> set[str]:
    return set(defaults()) | {"cls_token_id", "similarity", "pooling"}


def make_config(
    kind: str, spec: str, init: str | None, overrides: dict[str, Any] | None = None
) -> VisualSpartaConfig:
    """Preset/JSON config (+ ``overrides``); with a text-model ``init``, its transformer sizes replace
    the preset's."""
    if kind not in MODEL_CLASSES:
        raise ValueError(f"--model must be one of {sorted(MODEL_CLASSES)}, got {kind!r}")
    base = config_from_spec(spec, **(overrides or {}))
    values = {k: v for k, v in base.to_dict().items() if k in _config_fields()}
    if init:
        layers = config_from_spec(spec).num_hidden_layers if spec not in PRESETS else None
        values.update(text_model_dimensions(init))
        if layers is not None and layers < values.get("num_hidden_layers", layers):
            values["num_hidden_layers"] = layers  # a JSON config may copy only the first layers
        values["text_model"] = init
        # An explicit override still wins, e.g. num_hidden_layers=2 copies the text model's first 2 layers.
        values.update({k: v for k, v in (overrides or {}).items() if k in _config_fields()})
    config_cls = MODEL_CLASSES[kind][0]
    if config_cls is DenseConfig:
        values["cls_token_id"] = load_tokenizer(init or values.get("text_model")).cls_token_id
    return config_cls(**values)


def resolve_init(init: str | None, spec: str) -> str | None:
    if init is None:
        return "sentence-transformers/all-MiniLM-L6-v2" if spec == "base" else None
    return None if init.lower() == "none" else init


def latest_checkpoint(out: Path) -> tuple[int, Path] | None:
    found = [(int(m.group(1)), p) for p in out.glob("checkpoint-epoch-*") if (m := _CKPT.match(p.name))]
    found = [(e, p) for e, p in found if (p / TRAINER_STATE).exists()]
    return max(found) if found else None


def _best_epoch(val: list[dict[str, float]]) -> int | None:
    """1-based epoch with the highest R@1+R@5+R@10 (the earliest on ties); None without validation."""
    if not val:
        return None
    sums = [sum(v.values()) for v in val]
    return sums.index(max(sums)) + 1


def _batches(order: np.ndarray, batch_size: int) -> list[np.ndarray]:
    """Fixed-size chunks; a last chunk of one image is dropped (no negatives, nothing to learn)."""
    chunks = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    return [c for c in chunks if len(c) >= 2]


def _records(path: str, image_root: str | None, split: str, max_images: int | None) -> list[ManifestRecord]:
    records = [r for r in load_records(path, image_root, split) if r.captions]
    if max_images is not None:
        records = records[:max_images]
    if len(records) < 2:
        raise ValueError(f"{path}: need at least 2 images with captions to train with in-batch negatives")
    return records


def train(opts: TrainOptions) -> TrainResult:
    """Train (or resume) and write ``checkpoint-epoch-N`` folders and ``final`` under ``opts.out``."""
    if opts.epochs < 1 or opts.batch_size < 2 or opts.lr <= 0 or opts.captions_per_image < 1:
        raise ValueError("need epochs >= 1, batch_size >= 2, lr > 0, captions_per_image >= 1")
    if any(r is not None and r <= 0 for r in (opts.pretrained_lr, opts.stem_lr)):
        raise ValueError("learning rates must be > 0")
    augmentation = Augmentation(views=opts.augment_views, scale=tuple(opts.augment_scale), seed=opts.seed)
    t0 = time.perf_counter()
    out = Path(opts.out)
    device = resolve_device(opts.device)
    amp = (device.type == "cuda") if opts.amp is None else opts.amp
    model_cls = MODEL_CLASSES[opts.model][1] if opts.model in MODEL_CLASSES else None
    if model_cls is None:
        raise ValueError(f"--model must be one of {sorted(MODEL_CLASSES)}, got {opts.model!r}")

    resume_from = latest_checkpoint(out) if opts.resume else None
    if opts.resume and resume_from is None:
        log.warning("--resume: no checkpoint in %s, starting from scratch", out)
    torch.manual_seed(opts.seed)
    random.seed(opts.seed)
    if resume_from is not None:
        start_epoch, ckpt = resume_from
        model = model_cls.from_pretrained(str(ckpt))
        log.info("resuming from %s (epoch %d done)", ckpt, start_epoch)
    else:
        start_epoch = 0
        init = resolve_init(opts.init, opts.config)
        config = make_config(opts.model, opts.config, init, opts.overrides)
        model = build_model(config, init=init, model_class=model_cls)
    model.to(device).train()
    if model.config.freeze_word_embeddings:
        frozen = model.freeze_word_embeddings()
        log.info("word embeddings frozen: %d tensor(s) keep their initial values", frozen)
    freeze(model)  # a frozen stem: its regions come from the feature cache (attach below)
    qtok = model.query_tokenizer()

    train_records = _records(opts.manifest, opts.image_root, "train", opts.max_images)
    store = ImageStore(train_records, model.config, qtok.tokenize, augmentation=augmentation)
    val_store = None
    if opts.val:
        val_store = ImageStore(_records(opts.val, opts.image_root, "val", None), model.config, qtok.tokenize)
    out.mkdir(parents=True, exist_ok=True)  # only now: a bad config or manifest leaves no empty folder
    caches = Path(opts.feature_cache) if opts.feature_cache else out / "feature-cache"
    for name, s in (("train", store), ("val", val_store)):
        if s is not None:
            attach(s, model, caches / name, device=device, progress=opts.progress)
    steps_per_epoch = len(_batches(np.arange(len(store)), opts.batch_size))
    total_steps = steps_per_epoch * opts.epochs
    groups = parameter_groups(model, opts.lr, opts.pretrained_lr, opts.stem_lr)
    log.info(
        "learning rates: %s",
        ", ".join(f"{g['name']} {g['lr']:g} ({len(g['params'])} tensors)" for g in groups),
    )
    optimizer = torch.optim.AdamW(groups, lr=opts.lr, weight_decay=opts.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, warmup_then_decay(total_steps, math.ceil(opts.warmup * total_steps))
    )
    scaler = torch.amp.GradScaler(
        "cuda", enabled=amp and device.type == "cuda" and not torch.cuda.is_bf16_supported()
    )
    result = TrainResult(final_dir=out / "final")
    regularizer = SparsityRegularizer.for_model(model, total_steps, device)
    if resume_from is not None:
        state = torch.load(resume_from[1] / TRAINER_STATE, map_location="cpu", weights_only=False)
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        scaler.load_state_dict(state["scaler"])
        torch.set_rng_state(state["torch_rng"])
        random.setstate(state["python_rng"])
        if device.type == "cuda" and state.get("cuda_rng") is not None:
            torch.cuda.set_rng_state(state["cuda_rng"], device)
        result.losses = list(state["losses"])
        result.epoch_losses = list(state["epoch_losses"])
        result.val = list(state["val"])
        result.epoch_penalties = list(state.get("epoch_penalties", []))
        result.epoch_positive_terms = list(state.get("epoch_positive_terms", []))
        if regularizer is not None and state.get("sparsity"):
            regularizer.load_state_dict(state["sparsity"])
    best = _best_epoch(result.val)

    quiet_library_bars()  # checkpoint saves would draw "Writing model shards" bars into logs
    for epoch in range(start_epoch, opts.epochs):
        train_mode(model)
        order = epoch_order(len(store), opts.seed, epoch)
        rng = np.random.default_rng([opts.seed, epoch, 1])
        views = store.pick_views(np.random.default_rng([opts.seed, epoch, 2]))
        batches = _batches(order, opts.batch_size)
        bar = progress_bar(
            batches, desc=f"epoch {epoch + 1}/{opts.epochs}", enabled=opts.progress, leave=False
        )
        epoch_loss = 0.0
        penalty_sum = torch.zeros((), device=device)  # summed on the device: no per-step host sync
        positive_sum = torch.zeros((), device=device)
        for idx in bar:
            batch = make_batch(store, idx.tolist(), opts.captions_per_image, rng, views[idx]).to(device)
            loss, total, sparsity = step_losses(model, batch, regularizer, len(result.losses), device, amp)
            if sparsity is not None:
                penalty_sum += sparsity[0].detach()
                positive_sum += sparsity[1]
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(total).backward()
            if opts.max_grad_norm:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), opts.max_grad_norm)
            scaler.step(optimizer)
            scaler.update()
            scheduler.step()
            value = float(loss.detach())
            result.losses.append(value)
            epoch_loss += value
            bar.set_postfix(loss=f"{value:.4f}", refresh=False)  # drawn at the bar's own interval
        result.epoch_losses.append(epoch_loss / max(1, len(batches)))
        msg = f"epoch {epoch + 1}/{opts.epochs}: loss {result.epoch_losses[-1]:.4f}"
        if regularizer is not None:
            result.epoch_penalties.append(float(penalty_sum) / max(1, len(batches)))
            result.epoch_positive_terms.append(float(positive_sum) / max(1, len(batches)))
            msg += (
                f" | sparsity penalty {result.epoch_penalties[-1]:.4f}, "
                f"{result.epoch_positive_terms[-1]:.0f} positive terms/img"
            )
        stop = False
        if val_store is not None:
            from vsparta.model.evaluate import quick_recall

            metrics = quick_recall(model, val_store, device=device, amp=amp)
            result.val.append(metrics)
            msg += " | val " + " ".join(f"{k} {v:.3f}" for k, v in metrics.items())
            train_mode(model)
            if opts.keep_best and _best_epoch(result.val) == len(result.val) and best != len(result.val):
                model.save_pretrained(str(out / BEST))  # written before the checkpoint that records it
            best = _best_epoch(result.val)
            stop = opts.patience is not None and best is not None and len(result.val) - best >= opts.patience
        log.info(msg)
        _save_checkpoint(
            out / f"checkpoint-epoch-{epoch + 1}",
            model,
            optimizer,
            scheduler,
            scaler,
            result,
            opts,
            None if regularizer is None else regularizer.state_dict(),
        )
        if stop:
            log.info("early stop: no validation gain for %d epochs (best: epoch %s)", opts.patience, best)
            break

    model.eval()
    result.best_epoch = best
    if opts.keep_best and best is not None and (out / BEST).exists():
        if result.final_dir.exists():
            shutil.rmtree(result.final_dir)
        shutil.copytree(out / BEST, result.final_dir)
        log.info("final = epoch %d (best validation R@1+R@5+R@10)", best)
    else:
        model.save_pretrained(str(result.final_dir))
    result.seconds = time.perf_counter() - t0
    (out / "train_log.json").write_text(
        json.dumps(
            {
                "options": asdict(opts),
                "epoch_losses": result.epoch_losses,
                "epoch_penalties": result.epoch_penalties,
                "epoch_positive_terms": result.epoch_positive_terms,
                "best_epoch": result.best_epoch,
                "val": result.val,
                "seconds": round(result.seconds, 1),  # of this call (a resumed run: since the resume)
                "losses": result.losses,
            },
            indent=1,
        ),
        encoding="utf-8",
    )
    return result


def step_losses(
    model: Any,
    batch: Any,
    regularizer: SparsityRegularizer | None,
    step: int,
    device: torch.device,
    amp: bool,
) -> tuple[torch.Tensor, torch.Tensor, tuple[torch.Tensor, torch.Tensor] | None]:
    """One batch's ranking loss (Eq. 13, in-batch negatives), the loss to minimise (with the
    presence penalty, ``model.presence``, when the config weighs it), and the sparsity penalty with
    the positive terms it counted (None without a regularizer)."""
    presence = float(getattr(getattr(model, "config", None), "presence_weight", 0.0))
    with autocast_for(device, amp):
        if regularizer is None and not presence:
            scores = model(batch.query_ids, batch.query_mask, **batch.image_inputs())  # [Q, B]
        else:
            h, h_mask = model.encode_images(**batch.image_inputs())
            scores = model.score(batch.query_ids, batch.query_mask, h, h_mask)
    loss = F.cross_entropy(scores.float(), batch.targets)
    total = loss + presence * presence_penalty(model, h, h_mask, batch) if presence else loss
    if regularizer is None:
        return loss, total, None
    k = regularizer.images or h.shape[0]
    penalty, positive = regularizer(
        model.vocab_phi(h[:k], h_mask[:k], ids=regularizer.sample_ids(device)), step
    )
    return loss, total + penalty, (penalty, positive)


def _save_checkpoint(
    path: Path,
    model: Any,
    optimizer: Any,
    scheduler: Any,
    scaler: Any,
    result: TrainResult,
    opts: TrainOptions,
    sparsity: dict[str, float] | None = None,
) -> None:
    model.save_pretrained(str(path))
    state = {
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "scaler": scaler.state_dict(),
        "torch_rng": torch.get_rng_state(),
        "python_rng": random.getstate(),
        "cuda_rng": torch.cuda.get_rng_state() if torch.cuda.is_available() else None,
        "losses": result.losses,
        "epoch_losses": result.epoch_losses,
        "val": result.val,
        "epoch_penalties": result.epoch_penalties,
        "epoch_positive_terms": result.epoch_positive_terms,
        "sparsity": sparsity,
        "options": asdict(opts),
    }
    tmp = path / (TRAINER_STATE + ".tmp")
    torch.save(state, tmp)
    tmp.replace(path / TRAINER_STATE)  # a checkpoint counts only once its trainer state is complete
