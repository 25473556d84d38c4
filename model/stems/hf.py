"""``hf``: a Hugging Face vision backbone (ViT-like tokens or ConvNet maps) as a patch grid."""

from __future__ import annotations

import math
from typing import Any, ClassVar

import torch

from vsparta.model.stems.base import VisionStem, grid_boxes


class HFStem(VisionStem):
    """The architecture comes from ``config.hf_vision_config`` so a saved model reloads offline;
    pretrained weights are copied in once, when a fresh model is built (``prepare``)."""

    pretrained: ClassVar[bool] = True

    @classmethod
    def check_config(cls, config: Any) -> None:
        if not (config.hf_vision_model or config.hf_vision_config):
            raise ValueError("stem 'hf' needs hf_vision_model (hub id or local path)")

    @classmethod
    def prepare(cls, config: Any) -> Any:
        """Load the pretrained vision model once, record its architecture in the config and set
        ``region_feature_dim`` (and ``image_size`` when the model fixes one); returns the model."""
        from transformers import AutoModel

        if not config.hf_vision_model:
            raise ValueError("stem 'hf' needs hf_vision_model (hub id or local path)")
        vision = AutoModel.from_pretrained(config.hf_vision_model)
        vcfg = getattr(vision.config, "vision_config", None) or vision.config
        if hasattr(vision, "vision_model"):  # e.g. a CLIP checkpoint: keep its vision tower only
            vision = vision.vision_model
        config.hf_vision_config = vcfg.to_dict()
        hidden = getattr(vcfg, "hidden_size", None) or (getattr(vcfg, "hidden_sizes", None) or [None])[-1]
        if hidden is None:
            raise ValueError(f"cannot tell the feature size of {config.hf_vision_model}")
        config.region_feature_dim = int(hidden)
        size = getattr(vcfg, "image_size", None)
        if isinstance(size, int):
            config.image_size = size
        return vision

    def __init__(self, config: Any) -> None:
        super().__init__()
        from transformers import AutoConfig, AutoModel

        if not config.hf_vision_config:
            raise ValueError("stem 'hf' needs config.hf_vision_config; build the model with build_model()")
        cfg = dict(config.hf_vision_config)
        vision_config = AutoConfig.for_model(cfg.pop("model_type"), **cfg)
        self.vision = AutoModel.from_config(vision_config)

    def load_pretrained(self, prepared: Any) -> None:
        missing, _ = self.vision.load_state_dict(prepared.state_dict(), strict=False)
        if missing:
            raise ValueError(f"pretrained vision weights miss {missing[:5]}")

    def forward(self, pixel_values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = self.vision(pixel_values=pixel_values)
        hidden = out.last_hidden_state
        if hidden.dim() == 4:  # ConvNet: [B, C, h, w]
            rows, cols = hidden.shape[2], hidden.shape[3]
            feats = hidden.flatten(2).transpose(1, 2)
        else:  # ViT-like: [B, extra + g*g, D]; drop [CLS]/register tokens in front
            g = int(math.isqrt(hidden.shape[1]))
            rows = cols = g
            feats = hidden[:, hidden.shape[1] - g * g :]
        return feats, grid_boxes(rows, cols, device=feats.device)


STEM = HFStem
