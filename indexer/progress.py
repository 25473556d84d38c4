"""Progress of an indexing job: ``vsparta.model.progress.progress_bar`` (the one home for how progress
looks: a bar on a terminal, one plain line per interval in a log, nothing when disabled), fed
from the writer thread and the encoder loop under a lock."""

from __future__ import annotations

import threading

from vsparta.model.progress import LOG_INTERVAL_S, progress_bar


class Progress:
    """Thread-safe counter of finished items (indexed, skipped or failed)."""

    def __init__(self, total: int, enabled: bool | None = None, log_every: float = LOG_INTERVAL_S) -> None:
        self.total = total
        self.done = 0
        self._lock = threading.Lock()
        self._bar = progress_bar(
            total=total, unit="img", enabled=enabled is not False, log_interval=log_every
        )

    def update(self, n: int = 1) -> None:
        with self._lock:
            self.done += n
            self._bar.update(n)

    def close(self) -> None:
        self._bar.close()
