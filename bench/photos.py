"""Generated photo-like JPEG sets for the indexing benchmarks and tests: decode cost like a photo's
(smooth gradients, noise, shapes), reproducible by seed, reused when already on disk."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np


def make_images(folder: Path, n: int, size: tuple[int, int], seed: int = 0, workers: int = 1) -> list[Path]:
    """Photo-like JPEGs (smooth gradients + noise + shapes) so decode cost is realistic.

    ``workers`` > 1 writes ranges of files in parallel processes (each range its own random
    stream: the pictures differ from a one-process run, their kind does not).
    """
    if workers <= 1 or n < 64:
        return _make_range(folder, 0, n, size, seed)
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    step = -(-n // (4 * workers))
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        parts = [
            pool.submit(_make_range, folder, first, min(step, n - first), size, seed)
            for first in range(0, n, step)
        ]
        return [path for part in parts for path in part.result()]


def _make_range(folder: Path, first: int, n: int, size: tuple[int, int], seed: int) -> list[Path]:
    """Files ``first .. first + n - 1``; the range from 0 draws from ``default_rng(seed)`` as before."""
    from PIL import Image, ImageDraw

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed if first == 0 else [seed, first])
    w, h = size
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    paths = []
    for i in range(first, first + n):
        base = np.stack(
            [xx / w * rng.uniform(50, 255), yy / h * rng.uniform(50, 255), (xx + yy) / (w + h) * 200], -1
        )
        arr = np.clip(base + rng.normal(0, 12, base.shape), 0, 255).astype(np.uint8)
        im = Image.fromarray(arr)
        draw = ImageDraw.Draw(im)
        for _ in range(6):
            x0, y0 = int(rng.integers(0, max(1, w - 8))), int(rng.integers(0, max(1, h - 8)))
            x1, y1 = x0 + int(rng.integers(4, max(5, w // 3))), y0 + int(rng.integers(4, max(5, h // 3)))
            draw.ellipse((x0, y0, x1, y1), fill=tuple(int(c) for c in rng.integers(0, 256, 3)))
        path = folder / f"img{i:05d}.jpg"
        im.save(path, quality=90)
        paths.append(path)
    return paths


def image_set(work: Path, n: int, size: tuple[int, int], workers: int = 1) -> list[Path]:
    """The JPEG test set in ``work/images``: reused when it already holds ``n`` files of ``size``."""
    from PIL import Image

    folder = work / "images"
    existing = sorted(folder.glob("img*.jpg")) if folder.is_dir() else []
    if len(existing) == n and existing:
        with Image.open(existing[0]) as im:
            if im.size == tuple(size):
                return existing
    if folder.is_dir():
        shutil.rmtree(folder)
    return make_images(folder, n, size, workers=workers)
