"""``patch``: a small conv net trained from scratch (tests, the demo's tiny model)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from vsparta.model.stems.base import VisionStem, grid_boxes


class PatchStem(VisionStem):
    """Image -> grid of patch features (each patch a region).

    Stride-2 conv stages (conv, GroupNorm, GELU), average-pooled to ``grid_size`` x ``grid_size``, a
    1x1 conv to ``region_feature_dim`` and a LayerNorm so the features enter Eq. 8 at a sane scale.
    """

    @classmethod
    def check_config(cls, config: Any) -> None:
        if config.image_size % config.grid_size:
            raise ValueError(f"image_size ({config.image_size}) must be a multiple of grid_size")
        if not config.stem_channels:
            raise ValueError("stem 'patch' needs at least one entry in stem_channels")

    def __init__(self, config: Any) -> None:
        super().__init__()
        stages: list[nn.Module] = []
        c_in = 3
        for c in config.stem_channels:
            stages += [nn.Conv2d(c_in, c, 3, stride=2, padding=1), nn.GroupNorm(1, c), nn.GELU()]
            c_in = c
        self.stages = nn.Sequential(*stages)
        self.pool = nn.AdaptiveAvgPool2d(config.grid_size)
        self.proj = nn.Conv2d(c_in, config.region_feature_dim, 1)
        self.norm = nn.LayerNorm(config.region_feature_dim, eps=1e-6)
        self.grid_size = config.grid_size

    def forward(self, pixel_values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # pixel_values [B, 3, S, S] -> features [B, g*g, d], boxes [g*g, 4]
        x = self.proj(self.pool(self.stages(pixel_values)))  # [B, d, g, g]
        feats = self.norm(x.flatten(2).transpose(1, 2))  # [B, g*g, d]
        return feats, grid_boxes(self.grid_size, self.grid_size, device=feats.device)


STEM = PatchStem
