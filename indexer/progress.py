"""Progress of an indexing job: ``vsparta.core.progress.progress_bar`` (the one home for how progress
looks: a bar on a terminal, one plain line per interval in a log, nothing when disabled), fed
from the writer thread and the encoder loop under a lock.

The input is listed as the job goes, so until the walk ends the total is the number of files
found so far, and the bar says so ("listing: 1,234 found so far").
"""

from __future__ import annotations

import threading
from typing import TextIO

from vsparta.core.progress import LOG_INTERVAL_S, progress_bar


class Progress:
    """Thread-safe counter of finished items (indexed, skipped or failed) out of those listed."""

    def __init__(
        self,
        total: int | None,
        enabled: bool | None = None,
        log_every: float = LOG_INTERVAL_S,
        stream: TextIO | None = None,
    ) -> None:
        self.total = total  # None while the listing goes on
        self.done = 0
        self._lock = threading.Lock()
        self._bar = progress_bar(
            total=total,
            unit="img",
            enabled=enabled is not False,
            log_interval=log_every,
            stream=stream,
            postfix=None if total is not None else "listing: 0 found so far",
        )

    def found(self, n: int) -> None:
        """The listing has found ``n`` items so far (the walk goes on)."""
        self._bar.total = n
        self._bar.postfix = f"listing: {n:,} found so far"

    def listing_done(self, total: int) -> None:
        """The walk ended: ``total`` is final, and the bar shows it plainly from now on."""
        with self._lock:
            self.total = total
            self._bar.total = total
            self._bar.postfix = None
            self._bar.refresh()

    def update(self, n: int = 1) -> None:
        with self._lock:
            self.done += n
            self._bar.update(n)

    def close(self) -> None:
        self._bar.close()
