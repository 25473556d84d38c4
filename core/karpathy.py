"""The Karpathy-split JSON of COCO / Flickr30K (``dataset_coco.json``, ``dataset_flickr30k.json``).

``{"images": [{"filepath"?, "filename", "split", "sentences": [{"raw": ...}], "cocoid"? ...}]}``.
Splits are ``train``, ``restval``, ``val``, ``test``; as usual, ``restval`` counts as training data.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from vsparta.core.manifest import ManifestRecord, read_manifest

SPLITS = ("train", "restval", "val", "test")
SPLIT_GROUPS = {"train": ("train", "restval"), "val": ("val",), "test": ("test",)}


def read_karpathy(
    json_path: str | Path, image_root: str | Path, splits: str | Sequence[str] = "test"
) -> list[ManifestRecord]:
    """Records of the chosen split(s); ``splits="train"`` means train + restval."""
    wanted = set(SPLIT_GROUPS.get(splits, (splits,)) if isinstance(splits, str) else splits)
    unknown = wanted - set(SPLITS)
    if unknown:
        raise ValueError(f"unknown Karpathy split(s) {sorted(unknown)}; choose from {SPLITS}")
    path = Path(json_path)
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get("images"), list):
        raise ValueError(f"{path}: not a Karpathy-split file (no 'images' list)")
    root = Path(image_root)
    dataset = str(data.get("dataset", ""))
    records = []
    for n, img in enumerate(data["images"]):
        try:
            if img["split"] not in wanted:
                continue
            filename = img["filename"]
            captions = [s["raw"].strip() for s in img.get("sentences", []) if s.get("raw", "").strip()]
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"{path}: image #{n} is malformed ({exc!r})") from None
        image_path = root / img["filepath"] / filename if img.get("filepath") else root / filename
        doc_id = str(img.get("cocoid", Path(filename).stem))
        meta = {"split": img["split"], "dataset": dataset, "filename": filename}
        records.append(ManifestRecord(doc_id, image_path, captions, meta))
    return records


def load_records(
    spec: str | Path, image_root: str | Path | None = None, split: str = "train"
) -> list[ManifestRecord]:
    """A manifest JSONL, or a Karpathy ``.json`` (then ``image_root`` and ``split`` apply)."""
    if str(spec).endswith(".json"):
        if image_root is None:
            raise ValueError(
                f"{spec} is a Karpathy-split file: give --image-root (the COCO/Flickr image folder)"
            )
        return read_karpathy(spec, image_root, split)
    return read_manifest(spec)
