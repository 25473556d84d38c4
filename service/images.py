"""Serve indexed images and cached thumbnails, only from the configured image roots.

A document's ``metadata["image"]`` is a path relative to one of the roots (or an absolute path
inside one). Whatever it says, the resolved file (symlinks followed) must lie under a root, so a
crafted document or id can never make the service read an arbitrary file.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from PIL import Image, UnidentifiedImageError

log = logging.getLogger(__name__)

IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp"}


def resolve_image(metadata: Mapping[str, Any], roots: Sequence[Path]) -> Path | None:
    """The image file a document names, if it is a file under one of ``roots``; else None."""
    name = metadata.get("image")
    if not isinstance(name, str) or not name or "\x00" in name:
        return None
    rel = Path(name)
    candidates = [rel] if rel.is_absolute() else [root / rel for root in roots]
    for candidate in candidates:
        try:
            real = candidate.resolve(strict=True)
        except (OSError, RuntimeError):  # missing file, symlink loop
            continue
        if real.suffix.lower() not in IMAGE_SUFFIXES or not real.is_file():
            continue
        if any(real.is_relative_to(root) for root in roots):
            return real
    return None


class Thumbnailer:
    """JPEG thumbnails cached on disk, keyed by file, modification time and size."""

    def __init__(self, cache_dir: Path | None, sizes: Sequence[int]) -> None:
        self.sizes = sorted(sizes)
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if cache_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="vsparta-thumbs-")
            cache_dir = Path(self._tmp.name)
        self.cache_dir = Path(cache_dir)
        self.cache_dir.mkdir(parents=True, exist_ok=True)

    def snap(self, size: int) -> int:
        """The smallest configured size >= ``size`` (bounded cache: a few sizes per image)."""
        return next((s for s in self.sizes if s >= size), self.sizes[-1])

    def thumbnail(self, image: Path, size: int) -> Path | None:
        """Path of the cached thumbnail (made now if missing); None if the image is unreadable."""
        size = self.snap(size)
        try:
            st = image.stat()
        except OSError:  # removed since it was resolved
            return None
        key = hashlib.sha256(f"{image}|{st.st_mtime_ns}|{st.st_size}|{size}".encode()).hexdigest()
        out = self.cache_dir / key[:2] / f"{key}.jpg"
        if out.exists():
            return out
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=out.parent, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh, Image.open(image) as im:
                im.draft("RGB", (size, size))  # JPEG: decode at reduced scale, much faster
                small = im.convert("RGB")
                small.thumbnail((size, size))
                small.save(fh, "JPEG", quality=85)
            os.replace(tmp, out)  # atomic: concurrent requests never see half a file
        except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError) as exc:
            log.warning("cannot make a thumbnail of %s: %s", image, exc)
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            return None
        return out

    def close(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
