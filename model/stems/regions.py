"""``none``: no stem; the model reads precomputed detector regions (``.npz``, the paper's setting)."""

from __future__ import annotations

from typing import Any, ClassVar

import torch

from vsparta.model.stems.base import VisionStem


class PrecomputedRegions(VisionStem):
    """Marks a model whose regions come from files (``core``/``model.regions``), never pixels."""

    takes_pixels: ClassVar[bool] = False

    def __init__(self, config: Any) -> None:
        super().__init__()

    def forward(self, pixel_values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        raise ValueError("this model has stem='none': it only accepts precomputed regions")


STEM = PrecomputedRegions
