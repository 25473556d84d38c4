"""Log an engine outage without flooding the log: one line per failed request, one traceback.

While an engine is down every request fails the same way; a traceback per request (the
client's own are ~44 lines, two per request) buried the log under megabytes in seconds. The
first failure of an outage logs its traceback, later ones a single line, and the first success
after it says how long the outage lasted.
"""

from __future__ import annotations

import logging
import time

from vsparta.termindex import registry

log = logging.getLogger("service.engine")


def client_loggers() -> list[logging.Logger]:
    """The engines' client loggers (``Engine.client_loggers``): a client such as Elasticsearch's
    logs a warning with a traceback for each failed attempt; ``DropClientFailures`` drops those."""
    return [logging.getLogger(name) for name in registry.client_loggers()]


class OutageLog:
    """Outage state of one engine (per app: two apps in one process log independently)."""

    def __init__(self) -> None:
        self._down_since: float | None = None
        self._failures = 0

    @property
    def down(self) -> bool:
        return self._down_since is not None

    def failed(self, where: str, exc: BaseException, traceback: bool = True) -> None:
        """One line; with the traceback only for the first failure of an outage (if wanted)."""
        self._failures += 1
        if self._down_since is None:
            self._down_since = time.monotonic()
            log.warning("%s: search engine unavailable: %s", where, exc, exc_info=exc if traceback else None)
            return
        log.warning(
            "%s: search engine still unavailable (%.0f s, %d failures): %s",
            where,
            time.monotonic() - self._down_since,
            self._failures,
            exc,
        )

    def recovered(self) -> None:
        if self._down_since is not None:
            log.warning(
                "search engine available again after %.1f s (%d failed requests)",
                time.monotonic() - self._down_since,
                self._failures,
            )
            self._down_since, self._failures = None, 0


class DropClientFailures(logging.Filter):
    """Drop a client library's per-attempt failure records (they carry a traceback each).

    The service logs each failed request itself (``OutageLog``), so these only repeated it.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return record.exc_info is None or record.levelno < logging.WARNING
