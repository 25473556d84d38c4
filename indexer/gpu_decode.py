"""JPEG decoding on the GPU (nvJPEG through ``torchvision.io.decode_jpeg``), with the CPU as fallback.

With a CUDA device, decode workers stop decoding plain JPEGs: they read the header (size guard,
mode, EXIF orientation, progressive or not, an end-of-image marker) and hand the file's bytes
over; the decode stage (``vsparta.indexer.decoder.Decoder``) decodes a batch of them on the GPU,
resizes (antialiased bicubic, like Pillow's) and hands uint8 pictures to the encoder without them
ever touching host memory. Everything else (PNG, WebP, CMYK, progressive, EXIF-rotated or
truncated JPEGs) is decoded on the CPU exactly as without a GPU, and a JPEG that nvJPEG refuses
is decoded on the CPU too (by the decoder, not here), so the failure report is the same.

Difference to the CPU path: the GPU resize works from the full-resolution decode and rounds the
same way; it differs from Pillow's resampling by rounding only (not measured yet: no GPU was
available when this was written; ``tests/indexer/test_indexer_gpu.py`` states the bound and
``scripts/gpu-check.sh`` runs it on a CUDA machine).
"""

from __future__ import annotations

import io
import logging
from typing import Any

import numpy as np

log = logging.getLogger(__name__)


def jpeg_for_gpu(data: bytes, max_pixels: int) -> bool:
    """Whether nvJPEG may decode this file and give exactly what ``load_image`` would.

    Header only: baseline JPEG, RGB (YCbCr) or grey, no EXIF rotation, within the size guard; and
    the file ends in an end-of-image marker (a truncated file goes to the CPU, which reports it as
    ``truncated``; whether nvJPEG would fail it or fill the rest in grey is not something to rely on).
    """
    from PIL import Image, UnidentifiedImageError

    if data[:3] != b"\xff\xd8\xff" or b"\xff\xd9" not in data[-64:]:
        return False
    try:
        with Image.open(io.BytesIO(data)) as im:
            w, h = im.size
            if im.format != "JPEG" or im.mode not in {"RGB", "L"} or not 0 < w * h <= max_pixels:
                return False
            if im.info.get("progressive") or im.info.get("progression"):
                return False
            orientation = im.getexif().get(0x0112, 1)
            return orientation in (1, None)
    except (OSError, UnidentifiedImageError, SyntaxError, ValueError, Image.DecompressionBombError):
        return False


def gpu_decode_available(device: Any) -> bool:
    """CUDA device and a torchvision with ``decode_jpeg``: otherwise every file goes to the CPU."""
    if getattr(device, "type", str(device)) != "cuda":
        return False
    try:
        from torchvision.io import decode_jpeg  # noqa: F401
    except ImportError:
        log.info("torchvision is not installed: JPEGs are decoded on the CPU")
        return False
    return True


class GpuJpegDecoder:
    """Batched nvJPEG decode + resize to uint8 ``[S, S, 3]`` pictures on ``device``."""

    def __init__(self, image_size: int, device: Any) -> None:
        self.image_size = image_size
        self.device = device

    def decode(self, files: list[np.ndarray]) -> list[Any]:
        """One picture (uint8 ``[S, S, 3]`` on the device) per file, or None where nvJPEG refused
        it. One bad file only costs a retry of the batch one file at a time."""
        import torch
        from torchvision.io import ImageReadMode, decode_jpeg

        # The bytes stay on the host (decode_jpeg reads them there); a read-only buffer is copied.
        tensors = [torch.from_numpy(np.require(f, np.uint8, ["W"])) for f in files]
        try:
            images: list[Any] = list(decode_jpeg(tensors, mode=ImageReadMode.RGB, device=self.device))
        except RuntimeError:
            images = []
            for t in tensors:
                try:
                    images.append(decode_jpeg(t, mode=ImageReadMode.RGB, device=self.device))
                except RuntimeError:
                    images.append(None)
        out: list[Any] = [None] * len(images)
        by_shape: dict[tuple[int, ...], list[int]] = {}
        for i, im in enumerate(images):
            if im is not None:
                by_shape.setdefault(tuple(im.shape), []).append(i)
        for rows in by_shape.values():  # one resize call per picture size, not per picture
            resized = self.resize_batch(torch.stack([images[i] for i in rows]))
            for k, i in enumerate(rows):
                out[i] = resized[k]
        return out

    def resize(self, image: Any) -> Any:
        """uint8 ``[3, H, W]`` -> uint8 ``[S, S, 3]`` (see ``resize_batch``)."""
        return self.resize_batch(image[None])[0]

    def resize_batch(self, images: Any) -> Any:
        """uint8 ``[n, 3, H, W]`` -> uint8 ``[n, S, S, 3]``: antialiased bicubic (Pillow's filter,
        a = -0.5), rounded to the nearest level."""
        import torch
        import torch.nn.functional as F

        s = self.image_size
        x = images.float()
        if tuple(x.shape[-2:]) != (s, s):
            x = F.interpolate(x, size=(s, s), mode="bicubic", antialias=True, align_corners=False)
        return x.round_().clamp_(0, 255).to(torch.uint8).permute(0, 2, 3, 1)


def gpu_decoder_for(encoder: Any, wanted: bool | None) -> GpuJpegDecoder | None:
    """The decode stage's GPU decoder for ``encoder``, or None (every file on the CPU).

    ``wanted`` None: when the encoder runs on CUDA and torchvision is there; True: required (an
    error otherwise); False: never.
    """
    if wanted is False:
        return None
    device = getattr(encoder, "device", None)  # TermEncoder's; test encoders have none
    if gpu_decode_available(device):
        return GpuJpegDecoder(encoder.preprocessor.image_size, device)
    if wanted:
        raise ValueError("--gpu-decode needs a CUDA device and torchvision")
    return None
