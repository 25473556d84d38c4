"""The failure report: one JSON line per item that could not be indexed (``path``, ``id``,
``reason``, ``message``), so a job over millions of files never stops for one bad file and the
bad ones can be inspected or retried afterwards."""

from __future__ import annotations

import contextlib
import json
import logging
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from vsparta.indexer.items import Failure
from vsparta.termindex.errors import DocumentsNotWritten

log = logging.getLogger(__name__)


class FailureReport:
    """Counts failures by reason and, given a path, appends them to a JSONL file as they happen."""

    def __init__(self, path: str | Path | None) -> None:
        self.path = Path(path) if path is not None else None
        self.by_reason: Counter[str] = Counter()
        self._fh: TextIO | None = None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = self.path.open("w", encoding="utf-8")

    def add(self, failure: Failure) -> None:
        self.by_reason[failure.reason] += 1
        log.debug("skipped %s (%s): %s", failure.path, failure.reason, failure.message)
        if self._fh is not None:
            record = {"path": failure.path, "id": failure.id, "reason": failure.reason}
            record["message"] = failure.message
            self._fh.write(json.dumps(record, ensure_ascii=False) + "\n")
            self._fh.flush()

    @contextlib.contextmanager
    def not_written(self) -> Iterator[None]:
        """Documents an engine still refused after its retries (a node lost, a shard moving): one
        line each, reason ``not_written``, then the error goes on (``--resume`` writes them)."""
        try:
            yield
        except DocumentsNotWritten as exc:
            for doc_id, reason in exc.failed.items():
                self.add(Failure(doc_id, doc_id, "not_written", reason))
            raise

    @property
    def total(self) -> int:
        return sum(self.by_reason.values())

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
