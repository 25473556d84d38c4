"""Reader stage: turn the job's input into an ordered list of work items with stable ids.

Formats: a folder of images (recursive), a folder of precomputed region ``.npz`` files, a
manifest JSONL (docs/architecture.md section 3, optional ``regions`` per line), or term-document JSONL
(a file or a folder of them: re-index without a model). ``auto`` decides by looking.
"""

from __future__ import annotations

import fnmatch
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Literal

from vsparta.core.walk import BY_COMPONENTS, sorted_walk
from vsparta.indexer.items import VERSION_KEY, WorkItem, file_version, path_id
from vsparta.indexer.termdocs import iter_term_records

InputFormat = Literal["auto", "images", "manifest", "regions", "terms"]
INPUT_FORMATS: tuple[str, ...] = ("auto", "images", "manifest", "regions", "terms")


def _rel(path: Path, root: Path) -> str:
    """Root-relative POSIX path when ``path`` lies under ``root``, else the absolute path."""
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.resolve().as_posix()


def detect_format(path: str | Path) -> str:
    """Guess the input format; raise ValueError with what was found when it is ambiguous."""
    from vsparta.core.images import IMAGE_EXTENSIONS

    path = Path(path)
    if not path.exists():
        raise ValueError(f"input {path} does not exist")
    if path.is_dir():
        exts = {e.lower() for e in IMAGE_EXTENSIONS}
        seen_npz = seen_jsonl = False
        for _dirpath, _dirs, files in os.walk(path):
            for name in files:
                suffix = Path(name).suffix.lower()
                if suffix in exts:
                    return "images"
                seen_npz |= suffix == ".npz"
                seen_jsonl |= suffix == ".jsonl"
        if seen_npz:
            return "regions"
        if seen_jsonl:
            return "terms"
        raise ValueError(f"{path}: no images, region .npz or term-document .jsonl files found")
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError:
                    break
                if isinstance(obj, dict) and "terms" in obj:
                    return "terms"
                if isinstance(obj, dict) and "image" in obj:
                    return "manifest"
                break
    raise ValueError(f"{path}: neither a manifest nor a term-document JSONL file (use --format)")


def read_items(
    path: str | Path, fmt: str = "auto", *, ignore_regions: bool = False, follow_symlinks: bool = False
) -> list[WorkItem]:
    """All work items of the input, in a deterministic order (a list: for tests and small inputs)."""
    return list(iter_items(path, fmt, ignore_regions=ignore_regions, follow_symlinks=follow_symlinks))


def iter_items(
    path: str | Path, fmt: str = "auto", *, ignore_regions: bool = False, follow_symlinks: bool = False
) -> Iterator[WorkItem]:
    """The work items of the input in :func:`read_items`' order; folders are walked lazily.

    A folder of images or regions is listed as the job goes (core/walk.py: one folder's names in
    memory at a time); a manifest or term-document input is read twice (``_checked_then_streamed``:
    whole first, keeping only the ids, so a bad line or a duplicate id stops the job before
    anything is written; then as the job goes). Bad arguments raise here, before the walk.
    """
    if fmt not in INPUT_FORMATS:
        raise ValueError(f"input format must be one of {INPUT_FORMATS}, got {fmt!r}")
    path = Path(path)
    if fmt == "auto":
        fmt = detect_format(path)
    if fmt == "images":
        return image_folder_items(path, follow_symlinks=follow_symlinks)
    if fmt == "regions":
        return region_folder_items(path)
    if fmt == "manifest":
        return manifest_items(path, ignore_regions=ignore_regions)
    return term_items(path)


def image_folder_items(root: Path, *, follow_symlinks: bool = False) -> Iterator[WorkItem]:
    """One item per image file, lazily; symbolic links follow one rule (``vsparta index --help``):

    - every file, link or not, gets the id of its OWN path relative to the folder, so a link and
      its target are two documents and the job's counts match the index;
    - a link whose target lies outside the folder is reported (``symlink_outside``) and not
      read, unless ``follow_symlinks``: indexing must not wander into files nobody put there;
    - a dangling link (or a loop) is reported as ``broken_symlink``, with the link's own id.
    """
    from vsparta.core.images import walk_image_files

    if not root.is_dir():
        raise ValueError(f"image folder {root} is not a directory")
    files = walk_image_files(root, include_symlinks=True)
    return _image_items(files, root.resolve(), follow_symlinks)


def _image_items(
    files: Iterator[tuple[str, str, bool]], real_root: Path, follow_symlinks: bool
) -> Iterator[WorkItem]:
    root_text = str(real_root)  # one string shared by every item's metadata
    for rel, path, is_link in files:
        file = Path(path)
        location = str(file)  # the same text the listing used to give ("./a.jpg" -> "a.jpg")
        meta = _versioned({"image": rel, "image_root": root_text}, file)
        rejected = _link_problem(file, real_root, follow_symlinks) if is_link else None
        yield WorkItem(id=path_id(rel), location=location, image=file, metadata=meta, rejected=rejected)


def _versioned(meta: dict[str, object], file: Path) -> dict[str, object]:
    """``meta`` with the version of the file the item is encoded from (``--resume`` writes a
    changed one again); none for a file that cannot be read."""
    if (version := file_version(file)) is not None:
        meta[VERSION_KEY] = version
    return meta


def _link_problem(file: Path, real_root: Path, follow_symlinks: bool) -> tuple[str, str] | None:
    """Why a symbolic link cannot be indexed, or None when its target is a file it may read."""
    try:
        target = file.resolve(strict=True)
    except (OSError, RuntimeError):
        return "broken_symlink", f"symbolic link to {os.readlink(file)!r}, which does not exist"
    if not target.is_file():
        return "broken_symlink", f"symbolic link to {target}, which is not a file"
    if not follow_symlinks and not target.is_relative_to(real_root):
        return (
            "symlink_outside",
            f"symbolic link to {target}, outside the input folder (skipped; --follow-symlinks indexes it)",
        )
    return None


def region_folder_items(root: Path) -> Iterator[WorkItem]:
    """One item per ``*.npz`` under the folder, lazily, in ``sorted(root.rglob("*.npz"))`` order."""
    if not root.is_dir():
        raise ValueError(f"region folder {root} is not a directory")
    real_root = str(root.resolve())

    def keep(entry: os.DirEntry[str]) -> bool:  # what rglob("*.npz") matches: any entry, hidden too
        return fnmatch.fnmatchcase(entry.name, "*.npz")

    def enter(entry: os.DirEntry[str]) -> bool:  # rglob enters real folders, not linked ones
        try:
            return entry.is_dir(follow_symlinks=False)
        except OSError:
            return False

    def items() -> Iterator[WorkItem]:
        for _rel_path, path, _link in sorted_walk(root, keep=keep, enter=enter, order=BY_COMPONENTS):
            file = Path(path)
            rel = _rel(file, root)
            meta = _versioned({"regions": rel, "image_root": real_root}, file)
            yield WorkItem(id=path_id(rel), location=str(file), regions=file, metadata=meta)

    return items()


def _checked_then_streamed(
    ids: Iterator[str], items: Callable[[], Iterator[WorkItem]], path: Path
) -> Iterator[WorkItem]:
    """The input read twice: ``ids`` (every line checked, only its id kept) to the end first, so a
    bad line or a duplicate id raises before the job writes anything; then ``items()`` for the job
    to stream, so a million-line input costs the memory of its ids, not of its records."""
    seen: set[str] = set()
    for doc_id in ids:
        if doc_id in seen:
            raise ValueError(f"{path}: duplicate document id {doc_id!r}")
        seen.add(doc_id)
    return items()


def manifest_items(manifest: Path, *, ignore_regions: bool = False) -> Iterator[WorkItem]:
    from vsparta.core.ids import routable_id
    from vsparta.core.manifest import iter_manifest

    root = manifest.resolve().parent

    def items() -> Iterator[WorkItem]:
        for rec in iter_manifest(manifest):
            meta = dict(rec.metadata)
            meta.update({"image": _rel(rec.image, root), "image_root": str(root)})
            if rec.captions:
                meta["captions"] = list(rec.captions)
            regions = None if ignore_regions else rec.regions
            _versioned(meta, regions if regions is not None else rec.image)
            location = str(regions if regions is not None else rec.image)
            yield WorkItem(id=rec.id, location=location, image=rec.image, regions=regions, metadata=meta)

    ids = (routable_id(rec.id, str(manifest)) for rec in iter_manifest(manifest))
    return _checked_then_streamed(ids, items, manifest)


def term_items(path: Path) -> Iterator[WorkItem]:
    def items() -> Iterator[WorkItem]:
        for rec in iter_term_records(path):
            yield WorkItem(id=rec["id"], location=str(path), terms=rec["terms"], metadata=rec["metadata"])

    return _checked_then_streamed((rec["id"] for rec in iter_term_records(path)), items, path)
