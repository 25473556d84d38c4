"""``TermEncoder``: the indexer's view of a trained model (images -> ``{vocab id: φ}``).

Contract (the indexer codes against it):
``TermEncoder.from_pretrained(path, device="auto", amp=None)``, ``.preprocessor``,
``.encode_pixels(batch [B,3,S,S] float32, top_n=1000)``, ``.encode_regions(list[Regions], top_n=1000)``,
``.id_to_token(i)``, ``.config``. Batched, on the model's device, in inference mode.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from model.configuration import VisualSpartaConfig
from model.modeling import VisualSpartaModel
from model.preprocess import ImagePreprocessor
from model.regions import Regions, collate_regions

log = logging.getLogger(__name__)


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """``auto`` = CUDA when available, else CPU; anything else is passed to ``torch.device``."""
    if isinstance(device, str) and device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda' was asked for but CUDA is not available")
    return dev


def autocast_for(device: torch.device, amp: bool) -> contextlib.AbstractContextManager:
    """bf16 autocast where the GPU supports it, fp16 otherwise; nothing on CPU or with amp off."""
    if not amp or device.type != "cuda":
        return contextlib.nullcontext()
    dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.autocast(device_type="cuda", dtype=dtype)


class TermEncoder:
    """Encodes batches of images into sparse term weights (paper Eq. 14)."""

    def __init__(
        self, model: VisualSpartaModel, device: str | torch.device = "auto", amp: bool | None = None
    ):
        if model.tokenizer is None:
            raise ValueError("the model has no tokenizer: term ids could not be shown or queried")
        self.device = resolve_device(device)
        self.amp = (self.device.type == "cuda") if amp is None else bool(amp)
        self.model = model.to(self.device).eval()
        self.config: VisualSpartaConfig = model.config
        self.preprocessor = ImagePreprocessor.from_config(model.config)
        self._query_tokenizer = model.query_tokenizer()

    @classmethod
    def from_pretrained(cls, path: str | Path, device: str = "auto", amp: bool | None = None) -> TermEncoder:
        return cls(VisualSpartaModel.from_pretrained(str(path)), device=device, amp=amp)

    def _top_terms(self, h: torch.Tensor, mask: torch.Tensor, top_n: int | None) -> list[dict[int, float]]:
        phi = self.model.term_weights(h, mask)  # [B, V]
        return self.model.top_terms(phi, top_n)

    @torch.inference_mode()
    def encode_pixels(self, batch: np.ndarray, top_n: int | None = 1000) -> list[dict[int, float]]:
        """``[B, 3, S, S]`` float32 from ``preprocessor`` -> one ``{vocab id: φ > 0}`` per image."""
        batch = np.asarray(batch, dtype=np.float32)
        s = self.config.image_size
        if batch.ndim != 4 or batch.shape[1:] != (3, s, s):
            raise ValueError(f"expected pixels [B, 3, {s}, {s}], got {batch.shape}")
        if len(batch) == 0:
            return []
        pixels = torch.from_numpy(batch).to(self.device, non_blocking=True)
        with autocast_for(self.device, self.amp):
            h, mask = self.model.encode_images(pixel_values=pixels)
            return self._top_terms(h, mask, top_n)

    @torch.inference_mode()
    def encode_regions(self, regions: Sequence[Regions], top_n: int | None = 1000) -> list[dict[int, float]]:
        """Precomputed detector regions (+ labels) -> one ``{vocab id: φ > 0}`` per image."""
        if not regions:
            return []
        batch = collate_regions(
            regions,
            self._query_tokenizer.tokenize,
            feature_dim=self.config.region_feature_dim,
            max_regions=self.config.max_regions,
            max_label_tokens=self.config.max_label_tokens,
        ).to(self.device)
        with autocast_for(self.device, self.amp):
            h, mask = self.model.encode_images(regions=batch)
            return self._top_terms(h, mask, top_n)

    def id_to_token(self, i: int) -> str:
        return self._query_tokenizer.id_to_token(i)
