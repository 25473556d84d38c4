"""A generated text-to-image benchmark: scenes of coloured shapes with five captions each.

Why generated: the demo, the tests and CI need a data set that exists offline, is small, and is
hard in the ways that matter for retrieval. Scenes come in *groups*: a base scene and variants of
it with colours swapped between two objects, positions swapped, the scene mirrored (relations
reversed) or sizes swapped. The variants sit in the same split, so a model that ignores colour,
position or relations cannot tell them apart and loses recall.

Everything is drawn from ``numpy`` generators seeded by (seed, split, group), so the same seed
gives byte-identical images and manifests, and splits can be generated independently.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from vsparta.core.manifest import ManifestRecord, write_manifest
from vsparta.core.progress import progress_bar
from vsparta.scenes.shape_captions import make_captions
from vsparta.scenes.shape_objects import SPLITS, relations_of, scene_group
from vsparta.scenes.shape_render import render_scene

log = logging.getLogger(__name__)


def _split_records(
    out_dir: Path, split: str, n: int, image_size: int, seed: int, progress: bool = True
) -> list[ManifestRecord]:
    split_index = SPLITS.index(split)
    img_dir = out_dir / "images" / split
    img_dir.mkdir(parents=True, exist_ok=True)
    records: list[ManifestRecord] = []
    group_index = 0
    bar = progress_bar(total=n, desc=f"scenes {split}", unit="img", enabled=progress and n > 0)
    while len(records) < n:
        grng = np.random.default_rng([seed, split_index, group_index])
        members = scene_group(grng)
        group_id = f"{split}-g{group_index:05d}"
        base_id = f"{split}-{len(records):05d}"
        for member_index, (kind, objects) in enumerate(members):
            if len(records) == n:
                break
            irng = np.random.default_rng([seed, split_index, group_index, member_index + 1])
            image_id = f"{split}-{len(records):05d}"
            image, background, placed = render_scene(irng, objects, image_size)
            fmt = "png" if irng.random() < 0.5 else "jpg"
            path = img_dir / f"{image_id}.{fmt}"
            if fmt == "png":
                image.save(path, format="PNG")
            else:
                image.save(path, format="JPEG", quality=90)
            captions = make_captions(irng, objects)
            metadata = {
                "split": split,
                "group": group_id,
                "variant": kind,
                "variant_of": None if kind == "base" else base_id,
                "format": fmt,
                "size": image_size,
                "background": background,
                "objects": [
                    {"shape": o.shape, "colour": o.colour, "size": o.size, "position": o.position, **p}
                    for o, p in zip(objects, placed, strict=True)
                ],
                "relations": [
                    {"subject": i, "relation": rel, "object": j} for i, rel, j in relations_of(objects)
                ],
            }
            records.append(ManifestRecord(id=image_id, image=path, captions=captions, metadata=metadata))
            bar.update(1)
        group_index += 1
    bar.close()
    return records


def generate_scenes(
    out_dir: str | Path,
    *,
    n_train: int = 2000,
    n_val: int = 200,
    n_test: int = 500,
    image_size: int = 96,
    seed: int = 0,
    progress: bool = True,
) -> dict[str, Path]:
    """Write images under ``out_dir/images/`` and ``out_dir/{train,val,test}.jsonl``.

    Returns split -> manifest path. Same arguments, same bytes. Images from an earlier, larger
    run in the same folder are not deleted, but manifests list only this run's images.
    """
    counts = {"train": n_train, "val": n_val, "test": n_test}
    for split, n in counts.items():
        if not isinstance(n, int) or n < 0:
            raise ValueError(f"n_{split} must be a non-negative integer, got {n!r}")
    if not isinstance(image_size, int) or not 32 <= image_size <= 1024:
        raise ValueError(f"image_size must be an integer in [32, 1024], got {image_size!r}")
    if not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    manifests: dict[str, Path] = {}
    for split, n in counts.items():
        records = _split_records(out, split, n, image_size, seed, progress)
        manifests[split] = write_manifest(out / f"{split}.jsonl", records)
        log.info("scenes: %s: %d images -> %s", split, len(records), manifests[split])
    return manifests
