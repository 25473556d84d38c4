"""What every vision stem is: pixels ``[B, 3, S, S]`` -> region features ``[B, n, d]`` and their
boxes ``[n, 4]`` (normalized x1, y1, x2, y2), plus the hooks a pretrained one needs."""

from __future__ import annotations

import hashlib
from typing import Any, ClassVar

import torch
from torch import nn


class VisionStem(nn.Module):
    """Base of every stem. A stem's module defines ``STEM`` (its class) and is registered in
    ``model.stems.registry``; nothing else in the model names a stem."""

    takes_pixels: ClassVar[bool] = True  # False: the model reads precomputed regions instead
    # True: ``prepare`` brings weights trained elsewhere; such a stem is frozen unless the config
    # says otherwise (``freeze_stem``), and fine-tuned at its own learning rate (``model.recipe``)
    pretrained: ClassVar[bool] = False

    @classmethod
    def frozen(cls, config: Any) -> bool:
        """Whether training leaves this stem as it is: ``config.freeze_stem``, else pretrained ones.
        A frozen stem's regions are computed once per image and view (``model.feature_cache``)."""
        choice = getattr(config, "freeze_stem", None)
        return cls.pretrained if choice is None else bool(choice)

    def fingerprint(self) -> str:
        """A hash of every weight and buffer: two stems with equal fingerprints compute the same
        regions from the same pixels (the feature cache's key)."""
        digest = hashlib.sha256(type(self).__name__.encode())
        for name, tensor in sorted(self.state_dict().items()):
            digest.update(name.encode())
            digest.update(tensor.detach().to("cpu", torch.float32).contiguous().numpy().tobytes())
        return digest.hexdigest()[:16]

    @classmethod
    def check_config(cls, config: Any) -> None:
        """Raise ``ValueError`` (one sentence naming the field) for settings this stem cannot take."""

    @classmethod
    def check_scale(cls, config: Any, size: int) -> None:
        """Raise ``ValueError`` (one sentence) for an input size of ``index_scales`` this stem cannot
        read; by default only ``image_size``: a stem whose regions depend on the input size."""
        if size != config.image_size:
            raise ValueError(
                f"stem {config.stem!r} reads images at image_size ({config.image_size}) only: index_scales "
                f"{list(config.index_scales)} cannot hold {size}"
            )

    @classmethod
    def prepare(cls, config: Any) -> Any:
        """For a fresh model only (not a reload): fetch pretrained weights and record in ``config``
        what they fix (feature size, input normalisation, architecture) so the saved model reloads
        offline. Returns what ``load_pretrained`` copies in (None: nothing)."""
        return None

    def load_pretrained(self, prepared: Any) -> None:
        """Copy the weights ``prepare`` returned into this module."""

    def forward(self, pixel_values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError


def grid_boxes(rows: int, cols: int, device: torch.device | None = None) -> torch.Tensor:
    """Normalized x1,y1,x2,y2 of a rows x cols grid in row-major order: ``[rows*cols, 4]``."""
    r = torch.arange(rows, device=device, dtype=torch.float32)
    c = torch.arange(cols, device=device, dtype=torch.float32)
    rr, cc = torch.meshgrid(r, c, indexing="ij")
    rr, cc = rr.reshape(-1), cc.reshape(-1)
    return torch.stack([cc / cols, rr / rows, (cc + 1) / cols, (rr + 1) / rows], dim=1)


def box_locations(boxes: torch.Tensor) -> torch.Tensor:
    """x1,y1,x2,y2 ``[..., 4]`` -> ``[..., 6]`` = [xmin, xmax, ymin, ymax, w, h] (paper Eq. 3)."""
    x1, y1, x2, y2 = boxes.unbind(-1)
    return torch.stack([x1, x2, y1, y2, x2 - x1, y2 - y1], dim=-1)
