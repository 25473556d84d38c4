"""What training changes and how fast: a frozen stem, and a learning rate per part of the model.

Why: one rate for every part made pretrained models the worst ones here
(docs/quality-objects-full/quality.md): the paper fine-tunes its pretrained transformer at 5e-5,
while parts that start from random weights (the region projection, φ's bias, a tiny transformer)
need rates near 1e-3 to learn in a few epochs. So the parameters fall into groups, each with its
own rate, and all follow one schedule (linear warm-up, then linear decay to zero):

- ``stem``: a pretrained vision stem that is fine-tuned (``freeze_stem`` false): ``stem_lr``;
- ``pretrained``: what was copied from a text model (token, position and segment embeddings and the
  transformer layers, ``VisualSpartaPreTrainedModel._text_targets``; only the word embeddings when
  they come reduced from one, ``word_embeddings_from``): ``pretrained_lr``;
- ``new``: everything else (all of a model trained from scratch): ``lr``.

A rate left unset falls back to the next one down the list (``stem_lr`` to ``pretrained_lr`` to
``lr``), so a run that names only ``lr`` trains as it always did.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import nn

from vsparta.model.stems.registry import stem_class


def frozen_stem(model: Any) -> nn.Module | None:
    """The model's stem if training leaves it as it is (``VisionStem.frozen``), else None."""
    stem = model.image.stem
    if stem is None or not stem_class(model.config.stem).frozen(model.config):
        return None
    return stem


def freeze(model: Any) -> nn.Module | None:
    """Stop gradients into a frozen stem; returns it (None: the stem trains, or there is none)."""
    stem = frozen_stem(model)
    if stem is not None:
        stem.requires_grad_(False)
    return stem


def train_mode(model: Any) -> None:
    """``model.train()``, with a frozen stem kept in eval mode (its regions must not change)."""
    model.train()
    stem = frozen_stem(model)
    if stem is not None:
        stem.eval()


def parameter_groups(
    model: Any, lr: float, pretrained_lr: float | None = None, stem_lr: float | None = None
) -> list[dict[str, Any]]:
    """Optimizer groups (``name``, ``params``, ``lr``) of the trainable parameters; empty groups left
    out. ``pretrained`` exists only for a model initialised from a text model (``config.text_model``),
    ``stem`` only for a pretrained stem."""
    pretrained_lr = lr if pretrained_lr is None else pretrained_lr
    stem_lr = pretrained_lr if stem_lr is None else stem_lr
    stem = model.image.stem
    stem_ids = set()
    if stem is not None and stem_class(model.config.stem).pretrained:
        stem_ids = {id(p) for p in stem.parameters()}
    text_ids = set()
    if model.config.text_model:
        text_ids = {id(p) for pair in model._text_targets() for module in pair for p in module.parameters()}
    elif model.config.word_embeddings_from:
        text_ids = {id(embeddings.word_embeddings.weight) for embeddings, _ in model._text_targets()}
    groups: dict[str, dict[str, Any]] = {
        "stem": {"name": "stem", "params": [], "lr": stem_lr},
        "pretrained": {"name": "pretrained", "params": [], "lr": pretrained_lr},
        "new": {"name": "new", "params": [], "lr": lr},
    }
    for p in model.parameters():
        if not p.requires_grad:
            continue
        part = "stem" if id(p) in stem_ids else "pretrained" if id(p) in text_ids else "new"
        groups[part]["params"].append(p)
    return [g for g in groups.values() if g["params"]]


def warmup_then_decay(total: int, warmup_steps: int) -> Callable[[int], float]:
    """The factor on every group's rate at a step: linear warm-up over ``warmup_steps``, then a
    linear decay to zero at ``total``."""

    def factor(step: int) -> float:
        if warmup_steps and step < warmup_steps:
            return (step + 1) / warmup_steps
        return max(0.0, (total - step) / max(1, total - warmup_steps))

    return factor
