"""The dataset manifest (docs/architecture.md section 3): one JSON object per line, one image per object.

``{"id": str, "image": path, "captions": [str, ...], "metadata": {...}}``; relative image paths
are resolved against the manifest's folder so a data set can be moved as one directory.
Optional ``"regions"``: path of a precomputed-regions ``.npz`` (same resolution rule).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class ManifestRecord:
    id: str
    image: Path
    captions: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    regions: Path | None = None

    def to_json(self, root: Path | None = None) -> dict[str, Any]:
        """Serializable form; paths made relative to ``root`` when they lie under it."""

        def rel(p: Path) -> str:
            if root is not None:
                try:
                    return p.resolve().relative_to(root.resolve()).as_posix()
                except ValueError:
                    pass
            return str(p)

        out: dict[str, Any] = {"id": self.id, "image": rel(self.image), "captions": self.captions}
        if self.metadata:
            out["metadata"] = self.metadata
        if self.regions is not None:
            out["regions"] = rel(self.regions)
        return out


log = logging.getLogger(__name__)


class ManifestError(ValueError):
    """A manifest line is malformed; the message names the file and line."""


class JsonlError(ValueError):
    """A JSONL line is not valid JSON; the message names the file and line."""


def iter_jsonl(path: str | Path) -> Iterator[tuple[str, Any]]:
    """``(where, object)`` for each non-blank line of a JSONL file; ``where`` is ``file:line``.

    The one rule for every JSONL file this project reads (manifests, term documents): a last
    line with no newline that is not valid JSON is what a killed writer leaves behind, so it is
    skipped with a warning; any other invalid line is an error (``JsonlError``). Torch-free.
    """
    path = Path(path)
    with path.open(encoding="utf-8", buffering=1 << 20) as fh:  # a term document's line is ~35 KB
        for lineno, line in enumerate(fh, 1):
            if line.isspace():
                continue
            where = f"{path}:{lineno}"
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                if not line.endswith("\n"):  # only the last line can lack one: a half-written line
                    log.warning("%s: ignoring a half-written last line (no newline, not valid JSON)", where)
                    return
                raise JsonlError(f"{where}: not valid JSON ({exc.msg})") from None
            yield where, obj


def iter_manifest(path: str | Path) -> Iterator[ManifestRecord]:
    """Stream records; blank lines are skipped, malformed ones raise ``ManifestError``."""
    path = Path(path)
    root = path.parent
    try:
        for where, obj in iter_jsonl(path):
            if not isinstance(obj, dict):
                raise ManifestError(f"{where}: expected a JSON object")
            doc_id, image = obj.get("id"), obj.get("image")
            if not isinstance(doc_id, str) or not doc_id:
                raise ManifestError(f"{where}: 'id' must be a non-empty string")
            if not isinstance(image, str) or not image:
                raise ManifestError(f"{where}: 'image' must be a path string")
            captions = obj.get("captions", [])
            if not isinstance(captions, list) or not all(isinstance(c, str) for c in captions):
                raise ManifestError(f"{where}: 'captions' must be a list of strings")
            metadata = obj.get("metadata", {})
            if not isinstance(metadata, dict):
                raise ManifestError(f"{where}: 'metadata' must be an object")
            regions = obj.get("regions")
            yield ManifestRecord(
                id=doc_id,
                image=(root / image).resolve(),
                captions=captions,
                metadata=metadata,
                regions=(root / regions).resolve() if isinstance(regions, str) else None,
            )
    except JsonlError as exc:
        raise ManifestError(str(exc)) from None


def read_manifest(path: str | Path) -> list[ManifestRecord]:
    """All records; duplicate ids are an error (they would overwrite each other in an index)."""
    records = list(iter_manifest(path))
    seen: set[str] = set()
    for r in records:
        if r.id in seen:
            raise ManifestError(f"{path}: duplicate id {r.id!r}")
        seen.add(r.id)
    return records


def write_manifest(path: str | Path, records: Iterable[ManifestRecord]) -> Path:
    """Write records with paths relative to the manifest's folder."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    root = path.parent.resolve()
    with path.open("w", encoding="utf-8") as fh:
        for r in records:
            fh.write(json.dumps(r.to_json(root), ensure_ascii=False) + "\n")
    return path
