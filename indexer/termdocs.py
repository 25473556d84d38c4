"""Term-document JSONL (docs/architecture.md section 3): ``{"id", "terms": {token: weight}, "metadata"}``.

The export is sharded and numbered like clip-retrieval's outputs: ``terms-S{shard}-{part}.jsonl``
with a new part every ``docs_per_file`` documents, so N shard jobs can write into one folder
and a resumed job appends new parts instead of rewriting old ones. Keys are token strings (the
file is for people and for re-indexing without a model); the engines store vocabulary ids.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from vsparta.core.ids import routable_id
from vsparta.core.manifest import JsonlError, iter_jsonl
from vsparta.indexer.items import Held, WorkItem, held_as, stamp

if TYPE_CHECKING:
    from vsparta.indexer.batch import TermBatch

log = logging.getLogger(__name__)

_PART = re.compile(r"^terms-S(\d+)-(\d+)\.jsonl$")


class TermDocError(ValueError):
    """A term-document line is malformed; the message names the file and line."""


def iter_term_records(path: str | Path) -> Iterator[dict[str, Any]]:
    """Records of one JSONL file or of every ``*.jsonl`` in a folder (sorted by name).

    Lines are read by ``vsparta.core.manifest.iter_jsonl`` (the one rule for a half-written last line).
    """
    path = Path(path)
    files = sorted(path.glob("*.jsonl")) if path.is_dir() else [path]
    for file in files:
        try:
            for where, obj in iter_jsonl(file):
                yield _check_record(obj, where)
        except JsonlError as exc:
            raise TermDocError(str(exc)) from None


def _check_record(obj: Any, where: str) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise TermDocError(f"{where}: expected a JSON object")
    if not isinstance(obj.get("id"), str) or not obj["id"]:
        raise TermDocError(f"{where}: 'id' must be a non-empty string")
    try:
        routable_id(obj["id"], where)
    except ValueError as exc:
        raise TermDocError(str(exc)) from None
    terms = obj.get("terms")
    if not isinstance(terms, dict) or not all(isinstance(k, str) for k in terms):
        raise TermDocError(f"{where}: 'terms' must be an object of token -> weight")
    for token, weight in terms.items():
        if isinstance(weight, bool) or not isinstance(weight, int | float) or not math.isfinite(weight):
            raise TermDocError(f"{where}: weight of {token!r} must be a finite number")
    metadata = obj.get("metadata", {})
    if not isinstance(metadata, dict):
        raise TermDocError(f"{where}: 'metadata' must be an object")
    return {"id": obj["id"], "terms": terms, "metadata": metadata}


class TermDocExporter:
    """Writes numbered JSONL parts for one shard; on resume, keeps what earlier runs wrote.

    Each document is written only after the engine committed it (the writer thread calls
    ``write`` after ``upsert``), so the exported ids are a subset of the indexed ones and a
    resumed job never writes a document twice. A document written again because its file changed
    (``items.Held.CHANGED``) goes into a new part and its old line leaves the earlier one at
    ``close``; a run killed in between leaves both, and the next resumed run keeps the later.
    """

    def __init__(
        self,
        folder: str | Path,
        id_to_token: Callable[[int], str],
        *,
        shard: int = 0,
        num_shards: int = 1,
        docs_per_file: int = 10_000,
        resume: bool = False,
    ) -> None:
        if docs_per_file < 1:
            raise ValueError(f"docs per export file must be >= 1, got {docs_per_file}")
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.id_to_token = id_to_token
        self.shard = shard
        self.docs_per_file = docs_per_file
        self.stamps: dict[str, bytes] = {}  # id -> items.stamp of its metadata
        self._rewritten: set[str] = set()  # ids with a line in more than one part: the last wins
        self._gone: set[str] = set()  # ids pruned (--prune): every line of theirs leaves its part
        self._tokens: dict[int, str] = {}  # id_to_token is called once per vocabulary id
        self._fh: TextIO | None = None
        self._in_file = 0
        own = self._parts(only_shard=True)
        if resume:
            for _, path in own:
                for doc_id, held in self._repair(path).items():
                    if doc_id in self.stamps:  # a killed run wrote it again: the later line wins
                        self._rewritten.add(doc_id)
                    self.stamps[doc_id] = held
            self._drop_superseded()
            self._next_part = max((n for n, _ in own), default=-1) + 1
        else:
            # A fresh run replaces its shard's earlier export; an unsharded one replaces all shards'.
            for _, part in own if num_shards > 1 else self._parts(only_shard=False):
                part.unlink()
            self._next_part = 0

    def _parts(self, only_shard: bool) -> list[tuple[int, Path]]:
        out = []
        for p in self.folder.iterdir():
            m = _PART.match(p.name)
            if m and (not only_shard or int(m.group(1)) == self.shard):
                out.append((int(m.group(2)), p))
        return sorted(out)

    @staticmethod
    def _repair(path: Path) -> dict[str, bytes]:
        """Ids in one part and their metadata's stamps; a half-written last line (killed writer) is
        cut off the file."""
        data = path.read_bytes()
        keep = data.rfind(b"\n") + 1
        if keep != len(data):
            log.warning("%s: removing a half-written last line left by an interrupted run", path)
            with path.open("r+b") as fh:
                fh.truncate(keep)
        held = {}
        for line in data[:keep].decode("utf-8").splitlines():
            if line.strip():
                record = json.loads(line)
                held[record["id"]] = stamp(record.get("metadata") or {})
        return held

    def write(self, batch: TermBatch) -> None:
        """Export lines built from the arrays; rows are already heaviest first (ties by id)."""
        tokens = self._tokens
        for i, doc_id in enumerate(batch.ids):
            if self._fh is None or self._in_file >= self.docs_per_file:
                self._rotate()
            assert self._fh is not None
            ids, weights = batch.row(i)
            terms = {}
            for t, w in zip(ids.tolist(), weights.tolist(), strict=True):
                token = tokens.get(t)
                if token is None:
                    token = tokens[t] = self.id_to_token(t)
                terms[token] = w
            record = {"id": doc_id, "terms": terms, "metadata": dict(batch.metadata[i])}
            self._fh.write(json.dumps(record, ensure_ascii=False) + "\n")
            self._in_file += 1
            if doc_id in self.stamps:  # held by an earlier part: its file changed since
                self._rewritten.add(doc_id)
            self.stamps[doc_id] = stamp(batch.metadata[i])
        if self._fh is not None:
            self._fh.flush()

    def existing(self, items: Sequence[WorkItem]) -> dict[str, Held]:
        """Which of ``items`` this shard's export holds (read back from its parts on resume), each
        compared by its metadata's stamp."""
        held = self.stamps
        return {it.id: held_as(held[it.id], stamp(it.metadata)) for it in items if it.id in held}

    def bulk(self) -> contextlib.AbstractContextManager[object]:
        return contextlib.nullcontext()

    def finish(self) -> str | None:
        return None

    def unlisted(self, listed: set[str], mine: Callable[[str], bool]) -> set[str]:
        """This shard's exported ids the input no longer lists."""
        return {i for i in self.stamps if i not in listed and mine(i)}

    def remove(self, ids: set[str]) -> None:
        """Their lines leave the parts now (each part rewritten as in ``_drop_superseded``; a run
        killed before leaves them for the next ``--prune`` to find)."""
        gone = ids & self.stamps.keys()
        if not gone:
            return
        for doc_id in gone:
            del self.stamps[doc_id]
        if self._fh is not None:  # the last part is complete: rewritten like the others
            self._fh.close()
            self._fh = None
        self._gone |= gone
        self._drop_superseded()

    def _rotate(self) -> None:
        if self._fh is not None:
            self._fh.close()
        path = self.folder / f"terms-S{self.shard:05d}-{self._next_part:05d}.jsonl"
        self._next_part += 1
        self._fh = path.open("w", encoding="utf-8")
        self._in_file = 0

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        self._drop_superseded()

    def _drop_superseded(self) -> None:
        """Keep only the last line of each id written again, and none of an id pruned: each part
        that holds such a line is rewritten without it (a new file renamed over the old: a kill
        leaves one or the other whole, and the next resumed run finishes it)."""
        if not self._rewritten and not self._gone:
            return
        later = set(self._gone)
        for _, path in reversed(self._parts(only_shard=True)):
            lines = [line for line in path.read_text("utf-8").splitlines(keepends=True) if line.strip()]
            ids = [json.loads(line)["id"] for line in lines]
            kept = [line for line, i in zip(lines, ids, strict=True) if i not in later]
            later.update(i for i in ids if i in self._rewritten)
            if len(kept) != len(lines):
                tmp = path.with_name(path.name + ".tmp")
                tmp.write_text("".join(kept), "utf-8")
                os.replace(tmp, path)
        self._rewritten.clear()
        self._gone.clear()


def terms_from_tokens(
    terms: Mapping[str, float], token_to_id: Callable[[str], int | None], where: str
) -> dict[int, float]:
    """Token strings back to vocabulary ids; an unknown token means the wrong tokenizer."""
    out: dict[int, float] = {}
    for token, weight in terms.items():
        token_id = token_to_id(token)
        if token_id is None:
            raise TermDocError(f"{where}: token {token!r} is not in the tokenizer's vocabulary")
        out[token_id] = out.get(token_id, 0.0) + float(weight)
    return out
