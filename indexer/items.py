"""What flows through the pipeline: one work item per image (or region file, or term document).

Ids are stable so that a rerun overwrites instead of duplicating, and so that shards split the
input the same way on every machine:

- a manifest line keeps its own ``id``;
- a file found by walking a folder gets ``sha1(path relative to the folder, POSIX separators)``
  as 40 hex digits, so moving the whole folder elsewhere keeps every id.

Sharding hashes the id again (``sha1``, first 8 bytes, big-endian, modulo ``num_shards``): the
split is deterministic across processes and Python versions, unlike ``hash()``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Literal


def path_id(relative_path: str | Path) -> str:
    """Stable id of a file found by walking a folder: sha1 of its root-relative POSIX path."""
    rel = Path(relative_path).as_posix()
    return hashlib.sha1(rel.encode("utf-8")).hexdigest()


# Where the input lies, not what it is: a folder moved elsewhere keeps its documents on --resume.
LOCATION_KEYS = frozenset({"image_root"})
# Which version of its file a document was made from: a photo replaced or edited at the same path
# is the same input's document, changed, and a resumed job writes it again.
VERSION_KEY = "file_version"


def file_version(path: Path) -> str | None:
    """``size:mtime_ns`` of the file (a link: its target's), the check rsync makes by default; a
    copy that keeps modification times (mv, cp -a, rsync -a) resumes, another is indexed again.
    None when it cannot be read (the decoder reports why)."""
    try:
        st = path.stat()
    except OSError:
        return None
    return f"{st.st_size}:{st.st_mtime_ns}"


def input_fingerprint(metadata: Mapping[str, Any]) -> bytes:
    """What a resumed job compares to tell the document it wrote from another input's under the same
    id (another image or captions named by a manifest's id): the metadata the input gives, but its
    location (``LOCATION_KEYS``) and its file's version (``VERSION_KEY``), as canonical JSON,
    hashed. Equal for metadata an engine stored and gave back (JSON types)."""
    kept = {k: v for k, v in metadata.items() if k not in LOCATION_KEYS and k != VERSION_KEY}
    text = json.dumps(kept, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest()


class Held(Enum):
    """How a target holds an item's id, for ``--resume``."""

    AS_GIVEN = "as given"  # skipped
    CHANGED = "changed"  # this input's document, its file changed since: written again
    OTHER = "other"  # another input's document: the job stops (runner.ResumeMismatch)


def stamp(metadata: Mapping[str, Any]) -> bytes:
    """What ``--resume`` compares of a document, in 8 or 16 bytes (an export keeps one per id):
    its input's fingerprint, then a hash of its file's version when it has one."""
    version = metadata.get(VERSION_KEY)
    if version is None:
        return input_fingerprint(metadata)
    return input_fingerprint(metadata) + hashlib.blake2b(str(version).encode(), digest_size=8).digest()


def held_as(stored: bytes, given: bytes) -> Held:
    """The one rule, on two ``stamp``s: another fingerprint is another input's document; a version
    that differs is a changed file (a document written before versions were kept has none: as
    given)."""
    if stored[:8] != given[:8]:
        return Held.OTHER
    if len(stored) > 8 and stored != given:
        return Held.CHANGED
    return Held.AS_GIVEN


def shard_of(doc_id: str, num_shards: int) -> int:
    """Which of ``num_shards`` shards owns ``doc_id``; the same answer in every process."""
    digest = hashlib.sha1(doc_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % num_shards


def validate_shard(shard: int, num_shards: int) -> None:
    if num_shards < 1:
        raise ValueError(f"--num-shards must be >= 1, got {num_shards}")
    if not 0 <= shard < num_shards:
        raise ValueError(f"--shard must be in [0, {num_shards - 1}], got {shard}")


@dataclass(frozen=True, slots=True)  # slots: a job holds one per input file (millions)
class WorkItem:
    """One unit of input. Exactly one of ``image``/``regions``/``terms`` drives the encoding.

    ``regions`` wins over ``image`` when both are set (the manifest names precomputed region
    features); ``image`` is then only used for the image size and for serving.
    ``location`` is the human-readable path reported in the failure report. ``rejected``
    (reason, message): the reader already knows the item cannot be indexed (a symlink leaving
    the folder, a dangling one); it still flows through the job so the report lists it.
    """

    id: str
    location: str
    image: Path | None = None
    regions: Path | None = None
    terms: dict[str, float] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    rejected: tuple[str, str] | None = None

    @property
    def kind(self) -> Literal["pixels", "regions", "terms"]:
        if self.terms is not None:
            return "terms"
        if self.regions is not None:
            return "regions"
        return "pixels"


@dataclass(frozen=True)
class Failure:
    """Why an item was skipped; one line of the failure report."""

    id: str
    path: str
    reason: str
    message: str
