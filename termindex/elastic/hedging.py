"""Hedged reads: a read that has not answered within a few typical latencies is sent once more, to
another host of the spec, and the first answer wins.

A node that takes a request and then says nothing (cut off from its cluster before the others have
noticed, ~65 s at the engines' defaults; or hung) holds a search until the service's timeout (503),
however healthy the other hosts are: the service's client does not retry a timeout (its time bound
holds), and ``MasterProbe`` sees a cut-off host only once it knows it has no master. So with several
hosts, a read that sending twice cannot change (``_search``, ``_msearch``, ``_count``, ``_mget``, a
GET of a document) and that has not answered after ``delay()`` goes once more to a host its first
attempt did not use; whichever answers first is the answer, the other is cancelled. The delay
follows the answers (``factor`` times the median of the last ``window`` attempts' own latencies,
within ``[min_s, max_s]``): only the slow tail is sent twice, and a cluster slow everywhere raises
the delay instead of getting twice the load ("The Tail at Scale", Dean and Barroso, 2013). A host
whose first attempts lose ``STRIKES`` races in a row is given up (``give_up``: the client's pool
leaves it out for a while, then tries it again), so a silent host stops costing every other read
the delay. A budget bounds the extra load whatever the latencies do: each read earns ``BUDGET`` of
a second attempt, up to ``BURST`` saved (a host that goes silent is given up within the burst); a
slow read with none earned waits for its first attempt alone (``throttled``), as retry budgets do
(gRPC's retry throttling, Envoy's retry budget).
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeVar

from vsparta.termindex.elastic.masters import read_kind

T = TypeVar("T")

FIRST_DELAY_S = 0.5  # until MIN_SAMPLES attempts have answered
MIN_SAMPLES = 8
STRIKES = 3  # races in a row a host's first attempts lose before it is given up
BUDGET = 0.1  # second attempts each read earns: at most ~10 % of reads sent twice, over time
BURST = 10.0  # second attempts that may be saved up (and the budget a fresh client starts with)


def is_read(method: str, url: str) -> bool:
    """Whether a request only reads, so that sending it twice changes nothing (``masters.read_kind``)."""
    return read_kind(method, url) is not None


@dataclass
class Route:
    """The hosts one attempt should not use, and those it did (the transport's ``get_connection``
    reads and fills it through ``current_route``)."""

    avoid: frozenset[Any] = frozenset()
    used: list[Any] = field(default_factory=list)


_ROUTE: ContextVar[Route | None] = ContextVar("vsparta_hedge_route", default=None)


def current_route() -> Route | None:
    """The route of the attempt running in this task, or None outside a hedged read."""
    return _ROUTE.get()


class Hedge:
    """When to send a read again, and doing so."""

    def __init__(
        self,
        factor: float = 4.0,
        min_s: float = 0.05,
        max_s: float = 2.5,
        window: int = 64,
        budget: float = BUDGET,
        burst: float = BURST,
    ) -> None:
        if not 0 < min_s <= max_s or factor <= 0 or window < 1:
            raise ValueError("a hedge needs 0 < min_s <= max_s, factor > 0 and window >= 1")
        if not 0 <= budget <= 1 or burst < 1:
            raise ValueError("a hedge needs 0 <= budget <= 1 and burst >= 1")
        self.factor, self.min_s, self.max_s = factor, min_s, max_s
        self.budget, self.burst = budget, burst
        self._latencies: deque[float] = deque(maxlen=window)
        self._tokens = burst
        self.reads = 0
        self.hedged = 0  # reads sent twice
        self.won = 0  # of those, answered by the second attempt
        self.throttled = 0  # slow reads not sent twice: the budget was spent
        self._strikes: Counter[Any] = Counter()

    @classmethod
    def from_option(cls, value: Any, timeout_s: float) -> Hedge | None:
        """``hedge_after``: "auto" (a delay that follows the answers, at most half the request
        timeout), a fixed delay in seconds, or 0 / "off" (never)."""
        if value in (None, "auto"):
            return cls(max_s=max(timeout_s / 2, 0.05))
        if value in (0, "0", "off", False):
            return None
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            seconds = float("nan")
        if not 0 < seconds < float("inf"):
            raise ValueError(f'hedge_after must be "auto", "off" or seconds > 0, got {value!r}')
        return cls(min_s=seconds, max_s=seconds)

    def delay(self) -> float:
        """How long a read waits for its first attempt before it sends the second."""
        if len(self._latencies) < MIN_SAMPLES:
            typical = FIRST_DELAY_S
        else:
            typical = self.factor * statistics.median(self._latencies)
        return min(self.max_s, max(self.min_s, typical))

    async def run(
        self, attempt: Callable[[], Awaitable[T]], give_up: Callable[[Any], None] | None = None
    ) -> T:
        """``attempt()``'s answer; a second attempt, on another host, if the first is slow and the
        budget allows. A host whose first attempts lost ``STRIKES`` races in a row goes to ``give_up``."""
        self.reads += 1
        self._tokens = min(self.burst, self._tokens + self.budget)
        first = Route()
        tasks = {asyncio.ensure_future(self._timed(attempt, first))}
        try:
            done, _ = await asyncio.wait(tasks, timeout=self.delay())
            second = None
            if not done and self._tokens < 1:
                self.throttled += 1
            elif not done:
                self._tokens -= 1
                self.hedged += 1
                second = asyncio.ensure_future(self._timed(attempt, Route(avoid=frozenset(first.used))))
                tasks.add(second)
            error: BaseException | None = None
            while tasks:
                done, tasks = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
                failures = {task: task.exception() for task in done}  # each one read, none left to log
                for task, failure in failures.items():
                    if failure is None:
                        self._tally(first.used, lost=task is second, give_up=give_up)
                        return task.result()
                    error = error or failure
            assert error is not None
            raise error
        finally:
            for task in tasks:
                task.cancel()

    def _tally(self, hosts: list[Any], lost: bool, give_up: Callable[[Any], None] | None) -> None:
        """A race's outcome for the hosts the first attempt used."""
        self.won += lost
        for host in hosts:
            if not lost:
                self._strikes.pop(host, None)
                continue
            self._strikes[host] += 1
            if self._strikes[host] >= STRIKES and give_up is not None:
                del self._strikes[host]
                give_up(host)

    async def _timed(self, attempt: Callable[[], Awaitable[T]], route: Route) -> T:
        _ROUTE.set(route)  # this task's context only
        start = time.monotonic()
        answer = await attempt()
        self._latencies.append(time.monotonic() - start)
        return answer
