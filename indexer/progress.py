"""Progress: a tqdm bar (images/s, ETA) on a terminal, periodic log lines otherwise.

Batch jobs usually run with their output in a log file, where a bar's carriage returns are
noise and silence looks like a hang; there, one line every ``log_every`` seconds says how far
the job is, even when a bar was asked for. ``enabled=False`` shows nothing at all.
"""

from __future__ import annotations

import logging
import sys
import threading
import time

from tqdm import tqdm

log = logging.getLogger(__name__)


class Progress:
    """Thread-safe counter of finished items (indexed, skipped or failed)."""

    def __init__(self, total: int, enabled: bool | None = None, log_every: float = 30.0) -> None:
        self.total = total
        self.done = 0
        self._lock = threading.Lock()
        self._start = time.monotonic()
        self._last_log = self._start
        self._log_every = log_every
        self.enabled = enabled is not False
        # Decided before tqdm starts: it writes its first carriage-return line when created.
        self.bar_shown = self.enabled and _is_tty(sys.stderr)
        self._bar = tqdm(
            total=total, unit="img", disable=not self.bar_shown, smoothing=0.1, dynamic_ncols=True
        )

    def update(self, n: int = 1) -> None:
        with self._lock:
            self.done += n
            if self.bar_shown:
                self._bar.update(n)
                return
            if not self.enabled:
                return
            now = time.monotonic()
            if now - self._last_log >= self._log_every:
                self._last_log = now
                log.info("%s", self.line(now))

    def line(self, now: float | None = None) -> str:
        elapsed = (now or time.monotonic()) - self._start
        rate = self.done / elapsed if elapsed > 0 else 0.0
        eta = (self.total - self.done) / rate if rate > 0 else float("inf")
        eta_text = time.strftime("%H:%M:%S", time.gmtime(eta)) if eta != float("inf") else "?"
        return f"{self.done}/{self.total} images, {rate:.1f} images/s, ETA {eta_text}"

    def close(self) -> None:
        self._bar.close()


def _is_tty(fp: object) -> bool:
    isatty = getattr(fp, "isatty", None)
    try:
        return bool(isatty()) if callable(isatty) else False
    except (OSError, ValueError):
        return False
