"""Decode any image people throw at the indexer into a plain RGB picture, or say clearly why not.

Torch-free on purpose: the indexer's decode workers and the query service import this. Every
failure is an :class:`ImageError` with a machine-readable ``reason`` so a batch job can write a
failure report and carry on (issue 4): one bad file must never stop a job.
"""

from __future__ import annotations

import io
import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from vsparta.core.walk import BY_PATH_STRING, sorted_walk

IMAGE_EXTENSIONS = {".jpg", ".jpeg", ".png", ".webp", ".gif", ".bmp"}

# Pillow's own default for ``Image.MAX_IMAGE_PIXELS`` (about 0.25 GB of RGBA pixels).
DEFAULT_MAX_PIXELS = 89_478_485

Reason = Literal["empty", "not_an_image", "truncated", "too_large", "unsupported_mode", "unreadable"]
REASONS: frozenset[str] = frozenset(
    {"empty", "not_an_image", "truncated", "too_large", "unsupported_mode", "unreadable"}
)


class ImageError(ValueError):
    """An image could not be turned into RGB; ``reason`` says which kind of failure it was."""

    def __init__(self, reason: Reason, name: str, detail: str) -> None:
        if reason not in REASONS:
            raise ValueError(f"unknown ImageError reason {reason!r}")
        self.reason: str = reason
        self.name = name
        super().__init__(f"{name}: {detail} [{reason}]")


def load_image(
    source: str | Path | bytes, *, max_pixels: int = DEFAULT_MAX_PIXELS, draft_size: int | None = None
) -> Image.Image:
    """Return ``source`` (a path or the file's bytes) as a fully decoded RGB image.

    ``draft_size``: a JPEG may be decoded at 1/2, 1/4 or 1/8 scale (libjpeg's DCT scaling, Pillow's
    ``draft``) as long as both sides stay >= ``draft_size``: a model that sees S x S pixels then
    costs a fraction of a full decode. Other formats ignore it. Everything else is the same.

    EXIF orientation is applied, so pixels are as a person would see them; alpha is composited
    onto white (transparent regions of logos and icons are usually meant as "background");
    animated GIF/WebP give their first frame. The pixel-count guard reads the size from the
    header before any pixel is decoded, so a decompression bomb costs nothing. Truncated files
    are rejected rather than silently padded with grey (``LOAD_TRUNCATED_IMAGES`` is never set).

    Pillow's own global guard stays in force: above twice ``Image.MAX_IMAGE_PIXELS`` it refuses
    at open (reported as "too_large"), so a ``max_pixels`` beyond that has no further effect.
    """
    if not isinstance(max_pixels, int) or max_pixels <= 0:
        raise ValueError(f"max_pixels must be a positive integer, got {max_pixels!r}")
    if isinstance(source, (bytes, bytearray, memoryview)):
        name, data = "<bytes>", bytes(source)
    else:
        name = str(source)
        try:
            data = Path(source).read_bytes()
        except OSError as exc:
            raise ImageError("unreadable", name, f"cannot read file ({exc.strerror or exc})") from None
    if not data:
        raise ImageError("empty", name, "file is empty (0 bytes)")
    return _decode(data, name, max_pixels, draft_size)


def _decode(data: bytes, name: str, max_pixels: int, draft_size: int | None = None) -> Image.Image:
    if _riff_truncated(data):
        raise ImageError("truncated", name, "file is truncated (RIFF header declares more bytes)")
    with warnings.catch_warnings():
        # We apply our own limit below; Pillow's global one would only warn (or, at twice its
        # limit, raise DecompressionBombError, which we also map to "too_large").
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        try:
            im = Image.open(io.BytesIO(data))
        except UnidentifiedImageError:
            raise ImageError("not_an_image", name, "not a recognised image format") from None
        except Image.DecompressionBombError as exc:
            raise ImageError("too_large", name, str(exc)) from None
        except (OSError, SyntaxError, ValueError) as exc:
            raise ImageError("unreadable", name, f"cannot parse header ({exc})") from None
        with im:
            width, height = im.size
            if width * height > max_pixels:
                raise ImageError(
                    "too_large", name, f"{width}x{height} = {width * height} pixels > max_pixels={max_pixels}"
                )
            if width == 0 or height == 0:
                raise ImageError("unreadable", name, f"degenerate size {width}x{height}")
            if draft_size is not None and im.format == "JPEG":
                # Both sides stay >= draft_size, so any EXIF rotation applied below keeps it so.
                im.draft(im.mode, (draft_size, draft_size))
            try:
                im.seek(0)  # first frame of an animation
                im.load()  # force the full decode: truncation shows up here, not later
            except Image.DecompressionBombError as exc:
                raise ImageError("too_large", name, str(exc)) from None
            except (OSError, SyntaxError, ValueError, EOFError) as exc:
                msg = str(exc)
                reason: Reason = "truncated" if "truncat" in msg.lower() else "unreadable"
                detail = f"cannot decode pixels ({msg or type(exc).__name__})"
                raise ImageError(reason, name, detail) from None
            try:
                oriented = ImageOps.exif_transpose(im)  # always a new image, detached from the file
            except Exception:  # a broken EXIF block should not lose an otherwise good image
                oriented = im.copy()
            return _to_rgb(oriented, name)


def _riff_truncated(data: bytes) -> bool:
    """WebP decoders report truncation as a generic error; the RIFF header knows the real size."""
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WEBP":
        return False
    declared = int.from_bytes(data[4:8], "little") + 8
    return declared > len(data)


def _to_rgb(im: Image.Image, name: str) -> Image.Image:
    mode = im.mode
    if mode == "RGB":
        return im
    if mode in {"I;16", "I;16L", "I;16B", "I;16N", "I", "F"}:
        return _high_bit_depth_to_rgb(im)
    has_alpha = mode in {"RGBA", "LA", "PA", "RGBa", "La"} or "transparency" in im.info
    try:
        if has_alpha:
            rgba = im.convert("RGBA")
            white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
            return Image.alpha_composite(white, rgba).convert("RGB")
        return im.convert("RGB")
    except (ValueError, OSError) as exc:
        raise ImageError("unsupported_mode", name, f"cannot convert mode {mode!r} to RGB ({exc})") from None


def _high_bit_depth_to_rgb(im: Image.Image) -> Image.Image:
    """16-bit and 32-bit grey: Pillow's own convert("L") clips at 255 (mostly white), so scale."""
    arr = np.nan_to_num(np.asarray(im).astype(np.float64))
    peak = float(arr.max())
    if im.mode.startswith("I;16"):
        full = 65535.0
    elif im.mode == "F" and peak <= 1.0:
        full = 1.0  # float images in [0, 1]
    else:  # 32-bit containers: guess the bit depth from the data
        full = 255.0 if peak <= 255 else max(65535.0, peak)
    grey = np.clip(arr / full * 255.0 + 0.5, 0, 255).astype(np.uint8)
    return Image.fromarray(grey, mode="L").convert("RGB")


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def walk_image_files(root: str | Path, *, include_symlinks: bool = False) -> Iterator[tuple[str, str, bool]]:
    """Image files under ``root``, lazily: ``(relative POSIX path, path, is_symlink)`` each.

    The rules of :func:`iter_image_files` and its order, without holding the list (core/walk.py).
    """
    root = Path(root)
    if not root.is_dir():
        raise ValueError(f"{root} is not a directory")

    def enter(entry: os.DirEntry[str]) -> bool:  # real folders, not hidden, links not followed
        return not entry.name.startswith(".") and _is_dir(entry) and not entry.is_symlink()

    def keep(entry: os.DirEntry[str]) -> bool:
        name = entry.name
        if name.startswith(".") or os.path.splitext(name)[1].lower() not in IMAGE_EXTENSIONS:
            return False
        if _is_dir(entry):  # a folder (or a link to one) with an image's name
            return False
        return entry.is_file() or (include_symlinks and entry.is_symlink())

    return sorted_walk(root, keep=keep, enter=enter, order=BY_PATH_STRING)


def iter_image_files(root: str | Path, *, include_symlinks: bool = False) -> list[Path]:
    """All image files under ``root`` by extension (any case), in a deterministic sorted order.

    Symbolic links to files count as files; with ``include_symlinks`` every link with an image
    name is listed, dangling or not, so that the caller can report it (the indexer does).
    Linked folders are not descended into.

    Hidden files and anything inside hidden folders (names starting with ".") are skipped:
    those are editor backups, ``.git`` or thumbnails caches, never images to index. The order is
    by relative POSIX path so shards (issue 4) agree across machines.
    """
    return [Path(p) for _, p, _ in walk_image_files(root, include_symlinks=include_symlinks)]
