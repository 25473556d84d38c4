"""``TermEncoder``: the indexer's view of a trained model (images -> ``{vocab id: φ}``).

Contract (the indexer codes against it):
``TermEncoder.from_pretrained(path, device="auto", amp=None)``, ``.preprocessor``,
``.start_pixels(uint8 [B,S,S,3], top_n)`` -> pending, ``.finish(pending)`` -> CSR arrays,
``.encode_uint8`` (both at once), ``.encode_regions_csr(list[Regions], top_n)`` -> CSR arrays,
``.device_busy_seconds`` (CUDA events; None on CPU), ``.id_to_token(i)``, ``.config``.
The dict-returning ``encode_pixels`` / ``encode_regions`` remain for small callers and tests.

The indexer's path keeps the host out of the loop: uint8 pictures are copied from pinned
host memory without blocking, normalized on the device, the transformer runs under autocast,
φ and its top-n cut (``vsparta.model.topn.select_top_terms``) stay on the device, and one
device-to-host copy per batch returns CSR arrays. ``start``/``finish`` let the caller queue
batch k+1 before it waits for batch k, so the GPU is fed while the host handles results.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from vsparta.model.config_parts import DEFAULT_TOP_N
from vsparta.model.configuration import VisualSpartaConfig
from vsparta.model.modeling import VisualSpartaModel
from vsparta.model.preprocess import ImagePreprocessor
from vsparta.model.regions import Regions, collate_regions
from vsparta.model.topn import csr_to_dicts, drop_mask, select_top_terms, to_csr

Csr = tuple[np.ndarray, np.ndarray, np.ndarray]

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


@dataclass
class PendingBatch:
    """A batch queued on the device: top-n tensors not yet copied back, and its timing events."""

    ids: torch.Tensor
    weights: torch.Tensor
    counts: torch.Tensor
    events: tuple[torch.cuda.Event, torch.cuda.Event] | None = None


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
        self._drop = drop_mask(model.non_query_ids(), model.config.vocab_size, self.device)
        self._mean = torch.tensor(self.preprocessor.mean, device=self.device).view(1, 3, 1, 1)
        self._std = torch.tensor(self.preprocessor.std, device=self.device).view(1, 3, 1, 1)
        # Two pinned staging buffers, alternated: batch k+1 is copied while batch k may still run.
        self._pinned: list[torch.Tensor | None] = [None, None]
        self._turn = 0
        self._busy_ms = 0.0 if self.device.type == "cuda" else None

    @classmethod
    def from_pretrained(cls, path: str | Path, device: str = "auto", amp: bool | None = None) -> TermEncoder:
        return cls(VisualSpartaModel.from_pretrained(str(path)), device=device, amp=amp)

    @property
    def device_busy_seconds(self) -> float | None:
        """GPU time spent on finished batches (CUDA events, copy in to top-n); None on CPU."""
        return None if self._busy_ms is None else self._busy_ms / 1000.0

    def _top(self, phi: torch.Tensor, top_n: int | None) -> tuple[torch.Tensor, ...]:
        # phi [B, V] float32 (the model keeps φ out of autocast)
        return select_top_terms(phi, top_n, self._drop)

    def _stage(self, pixels: np.ndarray) -> torch.Tensor:
        """Host uint8 -> device uint8; on CUDA through a reused pinned buffer, without blocking."""
        tensor = torch.from_numpy(np.ascontiguousarray(pixels))
        if self.device.type != "cuda":
            return tensor
        slot = self._turn
        self._turn ^= 1
        buf = self._pinned[slot]
        if buf is None or buf.shape[0] < tensor.shape[0] or buf.shape[1:] != tensor.shape[1:]:
            buf = torch.empty(tensor.shape, dtype=torch.uint8).pin_memory()
            self._pinned[slot] = buf
        staged = buf[: tensor.shape[0]]
        staged.copy_(tensor)
        return staged.to(self.device, non_blocking=True)

    @torch.inference_mode()
    def start_pixels(
        self, pixels: np.ndarray | torch.Tensor, top_n: int | None = DEFAULT_TOP_N
    ) -> PendingBatch:
        """Queue uint8 ``[B, S, S, 3]`` pictures (host array, or a device tensor from a GPU JPEG
        decoder); returns at once on CUDA. ``finish`` gives the terms."""
        s = self.config.image_size
        if tuple(pixels.shape[1:]) != (s, s, 3) or pixels.dtype not in (np.uint8, torch.uint8):
            raise ValueError(
                f"expected uint8 pixels [B, {s}, {s}, 3], got {pixels.dtype} {tuple(pixels.shape)}"
            )
        events = None
        if self.device.type == "cuda":
            events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            events[0].record()
        x = pixels.to(self.device) if isinstance(pixels, torch.Tensor) else self._stage(pixels)
        # Same arithmetic as ImagePreprocessor.normalize, in float32 before autocast.
        # NCHW contiguous like the float path: a channels-last view would send the stem's convolution
        # to kernels whose sums depend on the thread count (documents must not).
        x = (x.permute(0, 3, 1, 2).contiguous().float() / 255.0 - self._mean) / self._std
        with autocast_for(self.device, self.amp):
            ids, weights, counts = self._top(self.model.image_term_weights(pixel_values=x), top_n)
        if events is not None:
            events[1].record()
        return PendingBatch(ids, weights, counts, events)

    def finish(self, pending: PendingBatch) -> Csr:
        """The one device-to-host copy of a batch: CSR ``(indptr, term_ids, weights)``."""
        out = to_csr(pending.ids, pending.weights, pending.counts)  # synchronizes with the batch
        if pending.events is not None and self._busy_ms is not None:
            pending.events[1].synchronize()
            self._busy_ms += pending.events[0].elapsed_time(pending.events[1])
        return out

    def encode_uint8(self, pixels: np.ndarray | torch.Tensor, top_n: int | None = DEFAULT_TOP_N) -> Csr:
        """uint8 ``[B, S, S, 3]`` -> CSR arrays of each image's top-n positive terms."""
        return self.finish(self.start_pixels(pixels, top_n))

    @torch.inference_mode()
    def encode_regions_csr(self, regions: Sequence[Regions], top_n: int | None = DEFAULT_TOP_N) -> Csr:
        """Precomputed detector regions (+ labels) -> CSR arrays of each image's top-n terms."""
        if not regions:
            return np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.float32)
        batch = collate_regions(
            regions,
            self._query_tokenizer.tokenize,
            feature_dim=self.config.region_feature_dim,
            max_regions=self.config.max_regions,
            max_label_tokens=self.config.max_label_tokens,
        ).to(self.device)
        with autocast_for(self.device, self.amp):
            return to_csr(*self._top(self.model.image_term_weights(regions=batch), top_n))

    @torch.inference_mode()
    def encode_pixels(self, batch: np.ndarray, top_n: int | None = DEFAULT_TOP_N) -> list[dict[int, float]]:
        """``[B, 3, S, S]`` float32 from ``preprocessor`` -> one ``{vocab id: φ > 0}`` per image."""
        batch = np.asarray(batch, dtype=np.float32)
        s = self.config.image_size
        if batch.ndim != 4 or batch.shape[1:] != (3, s, s):
            raise ValueError(f"expected pixels [B, 3, {s}, {s}], got {batch.shape}")
        if len(batch) == 0:
            return []
        pixels = torch.from_numpy(batch).to(self.device)
        with autocast_for(self.device, self.amp):
            phi = self.model.image_term_weights(pixel_values=pixels)
            return csr_to_dicts(*to_csr(*self._top(phi, top_n)))

    def encode_regions(
        self, regions: Sequence[Regions], top_n: int | None = DEFAULT_TOP_N
    ) -> list[dict[int, float]]:
        """Precomputed detector regions (+ labels) -> one ``{vocab id: φ > 0}`` per image."""
        if not regions:
            return []
        return csr_to_dicts(*self.encode_regions_csr(regions, top_n))

    def id_to_token(self, i: int) -> str:
        return self._query_tokenizer.id_to_token(i)

    def tokenize(self, text: str) -> list[int]:
        """A query's vocabulary ids, as the search engines tokenize it."""
        return self._query_tokenizer.tokenize(text)
