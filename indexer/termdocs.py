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
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from vsparta.core.ids import routable_id
from vsparta.core.manifest import JsonlError, iter_jsonl
from vsparta.indexer.items import Held, WorkItem, held_as, stamp

if TYPE_CHECKING:
    from vsparta.indexer.batch import TermBatch

log = logging.getLogger(__name__)

_PART = re.compile(r"^terms-S(\d+)-(\d+)\.jsonl$")
_LEFTOVER = re.compile(r"^terms-S(\d+)-\d+\.jsonl\.tmp$")  # a rewrite's new part, killed before its rename
_READ_BUFFER = 1 << 20  # a line is ~35 KB at 1,000 terms: the default 8 KB buffer read 3x slower


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
    if not isinstance(terms, dict) or not set(map(type, terms)) <= {str}:
        raise TermDocError(f"{where}: 'terms' must be an object of token -> weight")
    if not _finite_numbers(terms.values()):  # a thousand weights a line: checked in C, named in Python
        for token, weight in terms.items():
            if not _finite_numbers([weight]):
                raise TermDocError(f"{where}: weight of {token!r} must be a finite number")
    metadata = obj.get("metadata", {})
    if not isinstance(metadata, dict):
        raise TermDocError(f"{where}: 'metadata' must be an object")
    return {"id": obj["id"], "terms": terms, "metadata": metadata}


def _finite_numbers(values: Collection[Any]) -> bool:
    """Every value an int or a float (not a bool, not a string), finite."""
    if not set(map(type, values)) <= {int, float}:
        return False
    try:
        return all(map(math.isfinite, values))
    except OverflowError:  # an integer beyond any float
        return False


class TermDocExporter:
    """Writes numbered JSONL parts for one shard; on resume, keeps what earlier runs wrote.

    Each document is written only after the engine committed it (the writer thread calls
    ``write`` after ``upsert``), so the exported ids are a subset of the indexed ones and a
    resumed job never writes a document twice. A document written again because its file changed
    (``items.Held.CHANGED``) goes into a new part and its old line leaves the earlier one at
    ``close``; a run killed in between leaves both, and the next resumed run keeps the later. Only
    the parts that hold such a line are read again and rewritten: the exporter knows which part
    holds each id's last line.
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
        self._part_of: dict[str, int] = {}  # id -> the part that holds its last line (the one kept)
        self._stale: set[int] = set()  # parts holding a line that is no id's last, or a pruned id's
        self._tokens: dict[int, str] = {}  # vocabulary id -> its token as a JSON string (made once)
        self._fh: TextIO | None = None
        self._part = -1  # the part being written (``_rotate`` opens the first)
        self._in_file = 0
        self._remove_leftovers(every_shard=not resume and num_shards == 1)
        own = self._parts(only_shard=True)
        if resume:
            for part, path in own:
                for doc_id, held in self._repair(path).items():
                    self._hold(doc_id, held, part)  # a killed run wrote it again: the later line wins
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

    def _remove_leftovers(self, every_shard: bool) -> None:
        """A kill during a part's rewrite leaves its unfinished copy (the part itself is whole)."""
        for p in self.folder.iterdir():
            m = _LEFTOVER.match(p.name)
            if m and (every_shard or int(m.group(1)) == self.shard):
                log.warning("%s: removing a rewrite left unfinished by an interrupted run", p)
                p.unlink()

    @staticmethod
    def _repair(path: Path) -> dict[str, bytes]:
        """Ids in one part and their metadata's stamps, read a line at a time (a part is hundreds of
        megabytes); a half-written last line (killed writer) is cut off the file."""
        held = {}
        whole = 0  # bytes of complete lines
        with path.open("rb", buffering=_READ_BUFFER) as fh:
            for raw in fh:
                if not raw.endswith(b"\n"):
                    break
                whole += len(raw)
                if not raw.isspace():
                    doc_id, metadata = _id_and_metadata(raw.decode("utf-8"))
                    held[doc_id] = stamp(metadata or {})
        if whole != path.stat().st_size:
            log.warning("%s: removing a half-written last line left by an interrupted run", path)
            with path.open("r+b") as fh:
                fh.truncate(whole)
        return held

    def write(self, batch: TermBatch) -> None:
        """Export lines built from the arrays; rows are already heaviest first (ties by id).

        A line is formatted here rather than by ``json.dumps`` of a dict: each weight is written with
        9 significant digits (``%.9g``), which always reads back as the same float32 (the engines
        keep float32 or less), where ``json.dumps`` wrote the float64 repr of a float32 (17 digits:
        a line a fifth longer, twice as slow to write and to parse). Tokens are JSON-escaped once per
        vocabulary id. The key order and separators are ``json.dumps``' (the resumed read relies on
        them)."""
        tokens = self._tokens
        missing = set(batch.term_ids.tolist()).difference(tokens)
        for t in missing:
            tokens[t] = json.dumps(self.id_to_token(t), ensure_ascii=False)
        for i, doc_id in enumerate(batch.ids):
            if self._fh is None or self._in_file >= self.docs_per_file:
                self._rotate()
            assert self._fh is not None
            ids, weights = batch.row(i)
            pairs = zip(map(tokens.__getitem__, ids.tolist()), weights.tolist(), strict=True)
            terms = ", ".join(map(_TERM.__mod__, pairs))
            head = json.dumps(doc_id, ensure_ascii=False)
            metadata = json.dumps(dict(batch.metadata[i]), ensure_ascii=False)
            self._fh.write(f'{_HEAD}{head}, "terms": {{{terms}}}{_TAIL_KEY}{metadata}}}\n')
            self._in_file += 1
            self._hold(doc_id, stamp(batch.metadata[i]), self._part)  # held before: its file changed
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
            self._stale.add(self._part_of.pop(doc_id))
        if self._fh is not None:  # the last part is complete: rewritten like the others
            self._fh.close()
            self._fh = None
        self._drop_superseded()

    def _hold(self, doc_id: str, held: bytes, part: int) -> None:
        """``doc_id``'s last line is now in ``part``; a part that held an earlier one is stale."""
        before = self._part_of.get(doc_id)
        if before is not None and before != part:
            self._stale.add(before)
        self._part_of[doc_id] = part
        self.stamps[doc_id] = held

    def _rotate(self) -> None:
        if self._fh is not None:
            self._fh.close()
        self._part = self._next_part
        path = self.folder / f"terms-S{self.shard:05d}-{self._part:05d}.jsonl"
        self._next_part += 1
        self._fh = path.open("w", encoding="utf-8")
        self._in_file = 0

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        self._drop_superseded()

    def _drop_superseded(self) -> None:
        """Each stale part is rewritten with only the lines that are their id's last (so none of an
        id pruned): a new file renamed over the old, so a kill leaves one or the other whole, and the
        next resumed run finishes it."""
        if not self._stale:
            return
        for part, path in self._parts(only_shard=True):
            if part not in self._stale:
                continue
            tmp = path.with_name(path.name + ".tmp")
            left_out = 0
            with path.open("rb", buffering=_READ_BUFFER) as src, tmp.open("wb") as dst:
                for raw in src:
                    if not raw.isspace() and self._part_of.get(_line_id(raw.decode("utf-8"))) == part:
                        dst.write(raw)
                    else:
                        left_out += 1
            if left_out:
                os.replace(tmp, path)
            else:
                tmp.unlink()
        self._stale.clear()


# The exporter writes ``{"id": ..., "terms": {...}, "metadata": {...}}`` (json.dumps' separators).
# A resumed job reads back only each line's id and metadata: the terms are nine tenths of the line
# and parsing them cost 5x the rest. So the id is decoded from the line's head and the metadata from
# its tail, each where the structure proves it a top-level key (a quote inside a JSON string is
# escaped, so ``, "metadata": `` is structure; one closing brace after its value means depth one);
# any other line is parsed whole.
_HEAD = '{"id": '
_TAIL_KEY = ', "metadata": '
_TERM = "%s: %.9g"  # a JSON-escaped token and its weight; 9 digits give back every float32 exactly
_decoder = json.JSONDecoder()


def _line_id(line: str) -> Any:
    """The id of one exported line: its first key's value, else the whole line parsed."""
    if line.startswith(_HEAD):
        with contextlib.suppress(ValueError):
            return _decoder.raw_decode(line, len(_HEAD))[0]
    return json.loads(line)["id"]


def _id_and_metadata(line: str) -> tuple[Any, Any]:
    """The id and metadata of one exported line, without parsing its terms when the layout allows."""
    at = line.rfind(_TAIL_KEY)
    if line.startswith(_HEAD) and at > 0:
        with contextlib.suppress(ValueError):
            metadata, end = _decoder.raw_decode(line, at + len(_TAIL_KEY))
            if line[end:].rstrip() == "}":
                return _decoder.raw_decode(line, len(_HEAD))[0], metadata
    record = json.loads(line)
    return record["id"], record.get("metadata")


def terms_from_tokens(
    terms: Mapping[str, float], token_to_id: Callable[[str], int | None], where: str
) -> tuple[list[int], list[float]]:
    """Token strings back to vocabulary ids, as two lists in the line's order (a re-index maps a
    thousand a line: ``map`` over a C lookup such as a dict's ``get``, no Python call per token); an
    unknown token means the wrong tokenizer. Two tokens of one id add up (a tokenizer may give one
    id two spellings)."""
    ids = list(map(token_to_id, terms))
    if None in ids:
        token = next(t for t, i in zip(terms, ids, strict=True) if i is None)
        raise TermDocError(f"{where}: token {token!r} is not in the tokenizer's vocabulary")
    weights = [float(w) for w in terms.values()]
    if len(set(ids)) != len(ids):
        summed: dict[int, float] = {}
        for token_id, weight in zip(ids, weights, strict=True):
            summed[token_id] = summed.get(token_id, 0.0) + weight
        return list(summed), list(summed.values())
    return ids, weights  # type: ignore[return-value]
