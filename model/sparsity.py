"""Learned sparsity: a regularizer over φ of the whole vocabulary for a batch's images.

Why: the in-batch loss (Eq. 13) only scores the tokens of the batch's captions. With pretrained
token embeddings the ids that never occur in a caption keep real vectors, get no gradient and
score positive for every image (~21,900 positive terms per image with MiniLM), so cutting an image
to the n terms an engine holds throws out its true words. Penalizing φ over every id pushes those
ids below zero, and the index keeps each image's positive terms ("natural" sparsity).

- ``flops`` (SPLADE v2, Formal et al.): ``Σ_v (mean over images of φ_v)²``. Squaring the mean
  punishes terms that are on for many images (useless for ranking) far more than rare ones.
- ``l1``: ``mean over images of Σ_v φ_v``: every unit of weight costs the same.

The weight ramps up quadratically over the first ``sparsity_warmup`` of training (SPLADE), so the
model first learns what matters. With ``sparsity_target`` (mean positive terms per image) the weight
is also scaled up or down each step, on the device (no host sync), to steer towards the target.
"""

from __future__ import annotations

import math
from typing import Any

import torch

# Per-step multiplicative change of the target-driven scale, and its bounds.
_TARGET_RATE = 0.05
_SCALE_BOUNDS = (1e-3, 1e3)


def sparsity_penalty(phi: torch.Tensor, kind: str = "flops") -> torch.Tensor:
    """The regularizer of ``phi [B, V]`` (a scalar tensor); see the module docstring."""
    if kind == "flops":
        return phi.mean(dim=0).square().sum()
    if kind == "l1":
        return phi.sum(dim=1).mean()
    raise ValueError(f"unknown sparsity loss {kind!r} (flops or l1)")


def warmup_factor(step: int, total_steps: int, warmup: float) -> float:
    """Quadratic ramp ``(step / warm-up steps)²`` up to 1 over the first ``warmup`` fraction of the steps."""
    warm_steps = math.ceil(warmup * total_steps)
    if warm_steps <= 0 or step >= warm_steps:
        return 1.0
    return ((step + 1) / warm_steps) ** 2


class SparsityRegularizer:
    """Weight schedule and (optional) target steering of the sparsity penalty for one training run.

    ``scale`` (the target-driven multiplier) lives on the device and is saved with the trainer
    state, so a resumed run continues with the weight it had reached.
    """

    def __init__(self, config: Any, total_steps: int, device: torch.device) -> None:
        self.kind = str(config.sparsity_loss)
        self.weight = float(config.sparsity_weight)
        self.warmup = float(config.sparsity_warmup)
        self.target = None if config.sparsity_target is None else float(config.sparsity_target)
        self.images = config.sparsity_images
        self.vocab = config.sparsity_vocab
        self.vocab_size = int(config.vocab_size)
        self.total_steps = total_steps
        self.scale = torch.ones((), device=device)

    @classmethod
    def for_model(cls, model: Any, total_steps: int, device: torch.device) -> SparsityRegularizer | None:
        """None when the model has no vocabulary φ (dense baseline) or the weight is 0 (paper recipe)."""
        config = model.config
        if not hasattr(model, "vocab_phi") or float(getattr(config, "sparsity_weight", 0.0)) <= 0:
            return None
        return cls(config, total_steps, device)

    def sample_ids(self, device: torch.device) -> torch.Tensor | None:
        """The vocabulary ids to penalize this step: all (None), or ``sparsity_vocab`` drawn at random.

        Sampling makes the step cheaper (the ``[B, L, V]`` scores dominate on CPU); ``V / sample``
        rescales the penalty and the count, so both estimate the whole-vocabulary values."""
        if self.vocab is None or self.vocab >= self.vocab_size:
            return None
        return torch.randperm(self.vocab_size, device=device)[: self.vocab]

    def __call__(self, phi: torch.Tensor, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(weighted penalty, mean positive terms per image)`` for ``phi [B, V']`` (V' = all ids or a
        sample of them); both on the device."""
        factor = self.vocab_size / phi.shape[1]
        positive = (phi.detach() > 0).sum(dim=1).float().mean() * factor
        if self.target is not None:
            error = torch.log((positive + 1.0) / self.target)  # > 0: too many terms: raise the weight
            self.scale = (self.scale * torch.exp(_TARGET_RATE * torch.tanh(error))).clamp(*_SCALE_BOUNDS)
        weight = self.weight * warmup_factor(step, self.total_steps, self.warmup)
        return weight * self.scale * factor * sparsity_penalty(phi, self.kind), positive

    def state_dict(self) -> dict[str, float]:
        return {"scale": float(self.scale)}

    def load_state_dict(self, state: dict[str, float]) -> None:
        self.scale.fill_(float(state.get("scale", 1.0)))
