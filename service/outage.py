"""Log an engine outage in a bounded volume, however many clients keep asking.

While the engine is down every request fails the same way. One line per failed request made
~1 MB of log in 10 s from 8 clients; a long outage filled disks. The log now gets:

- the first failure of an outage, with its reason (the traceback only at DEBUG, i.e. ``-v``);
- at most one summary line per interval: "search engine unreachable: 3,815 requests answered
  503 in the last 10 s" (written when the next failure comes after the interval ended);
- one line when it recovers, with the outage's length and count.

An outage that starts within an interval of the last recovery line (a flapping engine) is not
announced again: its failures go into the next summary or recovery line. So at most three lines
per interval, each at most ``MAX_REASON_CHARS`` of reason: under 10 KB per minute for any number
of clients (``tests/service/test_service_outage.py`` counts the bytes).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from vsparta.termindex import registry

log = logging.getLogger(__name__)


def client_loggers() -> list[logging.Logger]:
    """The engines' client loggers (``Engine.client_loggers``): a client such as Elasticsearch's
    logs a warning with a traceback for each failed attempt; ``DropClientFailures`` drops those."""
    return [logging.getLogger(name) for name in registry.client_loggers()]


SUMMARY_INTERVAL_S = 10.0
MAX_REASON_CHARS = 300


def _short(text: str, limit: int = MAX_REASON_CHARS) -> str:
    """One line of at most ``limit`` characters (a reason or a request's path can be long)."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _reason(exc: BaseException) -> str:
    return _short(str(exc) or type(exc).__name__)


class OutageLog:
    """Outage state of one engine (per app: two apps in one process log independently).

    Called from the event loop only (error handlers, readiness), so it needs no lock.
    """

    def __init__(
        self, interval_s: float = SUMMARY_INTERVAL_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.interval_s = interval_s
        self._clock = clock  # a test's own clock: the intervals must not depend on the machine's load
        self._down = False
        self._recovered_at: float | None = None  # when the last announced outage ended
        self._announced = False  # is the current outage one that was announced?
        self._since = 0.0  # start of the announced outage
        self._failures = 0  # failures since the announced outage began (flaps included)
        self._window_start = 0.0
        self._window_failures = 0  # failures not yet in a summary line

    @property
    def down(self) -> bool:
        return self._down

    def failed(self, where: str, exc: BaseException, traceback: bool = True) -> None:
        """Count one failed request; log only what the rules above allow."""
        now = self._clock()
        if not self._down:
            self._down = True
            flapping = self._recovered_at is not None and now - self._recovered_at < self.interval_s
            if not flapping:
                brief = self._window_failures  # from outages too brief to announce, not yet logged
                self._announced, self._since = True, now
                self._failures, self._window_start, self._window_failures = 1, now, 0
                log.warning(
                    "%s: search engine unreachable: %s%s",
                    _short(where, 120),
                    _reason(exc),
                    f" (before it, {brief:,} requests answered 503 in brief outages)" if brief else "",
                )
                if traceback:
                    log.debug("the first failure of this outage", exc_info=exc)
                return
        self._failures += 1
        self._window_failures += 1
        if now - self._window_start >= self.interval_s:
            log.warning(
                "search engine unreachable: %s requests answered 503 in the last %.3g s (%s)",
                f"{self._window_failures:,}",
                now - self._window_start,
                _reason(exc),
            )
            self._window_start, self._window_failures = now, 0

    def recovered(self) -> None:
        if not self._down:
            return
        self._down = False
        if self._announced:
            self._announced, self._recovered_at = False, self._clock()
            log.warning(
                "search engine available again after %.1f s (%s requests answered 503)",
                self._clock() - self._since,
                f"{self._failures:,}",
            )
            self._window_failures = 0


class DropClientFailures(logging.Filter):
    """Drop a client library's per-attempt failure records (they carry a traceback each).

    The service logs outages itself (``OutageLog``), so these only repeated them.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return record.exc_info is None or record.levelno < logging.WARNING
