"""Hedged reads (``elastic.hedging``): a read that has not answered within the hedge's delay goes
once more to another host and the first answer wins; against a real node beside a host that takes
requests and never answers (as a node cut off from its cluster does until the others notice)."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from collections.abc import Iterator

import pytest
from elastic_testkit import fresh_index, random_docs, random_queries

from vsparta.bench.hedged_reads import LoopbackHost
from vsparta.termindex.elastic.hedging import (
    BUDGET,
    BURST,
    MIN_SAMPLES,
    STRIKES,
    Hedge,
    current_route,
    is_read,
)
from vsparta.termindex.elastic.index import AsyncElasticsearchIndex
from vsparta.termindex.errors import EngineUnavailable


def test_a_slow_first_attempt_is_answered_by_the_second_on_another_host() -> None:
    seen: list[object] = []
    cancelled: list[bool] = []

    async def attempt() -> str:
        route = current_route()
        assert route is not None
        host = "h2" if "h1" in route.avoid else "h1"
        route.used.append(host)  # what the transport's get_connection does
        seen.append(route.avoid)
        if host == "h1":
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                cancelled.append(True)
                raise
        return f"from {host}"

    async def run() -> str:
        hedge = Hedge(min_s=0.05, max_s=0.05)
        answer = await hedge.run(attempt)
        await asyncio.sleep(0)  # let the loser's cancellation run
        assert (hedge.reads, hedge.hedged, hedge.won) == (1, 1, 1)
        return answer

    assert asyncio.run(run()) == "from h2"
    assert seen == [frozenset(), frozenset({"h1"})] and cancelled == [True]


def test_a_host_that_loses_races_in_a_row_is_given_up() -> None:
    slow = {"h1"}
    given_up: list[str] = []

    async def attempt() -> str:
        route = current_route()
        assert route is not None
        host = "h2" if "h1" in route.avoid else "h1"
        route.used.append(host)
        await asyncio.sleep(30 if host in slow else 0)
        return host

    async def run() -> None:
        hedge = Hedge(min_s=0.02, max_s=0.02)
        for _ in range(STRIKES - 1):
            assert await hedge.run(attempt, give_up=given_up.append) == "h2"
        slow.clear()  # h1 answers in time once: its count starts again
        assert await hedge.run(attempt, give_up=given_up.append) == "h1"
        slow.add("h1")
        for _ in range(STRIKES - 1):
            await hedge.run(attempt, give_up=given_up.append)
        assert given_up == []
        await hedge.run(attempt, give_up=given_up.append)
        assert given_up == ["h1"]

    asyncio.run(run())


def test_the_budget_bounds_the_reads_sent_twice_when_every_first_attempt_is_slow() -> None:
    """Every first attempt slow (a cluster slow everywhere, latencies too wide for the delay to
    follow): at most the burst plus ``BUDGET`` of the reads are sent twice; the others wait for
    their first attempt, and every read is answered."""
    sent: list[str] = []

    async def attempt() -> str:
        route = current_route()
        assert route is not None
        host = "h2" if route.avoid else "h1"
        route.used.append(host)
        sent.append(host)
        await asyncio.sleep(0.05 if host == "h1" else 0)
        return host

    async def run() -> Hedge:
        hedge = Hedge(min_s=0.005, max_s=0.005)
        answers = [await hedge.run(attempt) for _ in range(100)]
        assert len(answers) == 100 and set(answers) == {"h1", "h2"}
        return hedge

    hedge = asyncio.run(run())
    # the burst, then one second attempt per 1 / BUDGET reads: 11 + (100 - 11) // 10 = 19 when
    # every first attempt is slow (a loaded machine may answer some in time: fewer, never more)
    assert 0 < hedge.hedged <= int(BURST) + 1 + int((100 - int(BURST) - 1) * BUDGET + 1e-9)
    assert hedge.throttled >= 60 and hedge.hedged + hedge.throttled <= 100
    assert sent.count("h2") == hedge.hedged
    with pytest.raises(ValueError, match="budget"):
        Hedge(budget=1.5)


def test_a_read_that_answers_in_time_is_sent_once() -> None:
    calls: list[int] = []

    async def attempt() -> int:
        calls.append(1)
        return 7

    async def run() -> Hedge:
        hedge = Hedge()
        assert await hedge.run(attempt) == 7
        return hedge

    hedge = asyncio.run(run())
    assert calls == [1] and (hedge.reads, hedge.hedged, hedge.won) == (1, 0, 0)


def test_when_both_attempts_fail_the_read_fails_with_the_first_error() -> None:
    async def attempt() -> None:
        route = current_route()
        assert route is not None
        first = not route.avoid
        route.used.append("h1" if first else "h2")
        await asyncio.sleep(0.2 if first else 0.0)
        raise EngineUnavailable("first" if first else "second")

    async def run() -> None:
        await Hedge(min_s=0.05, max_s=0.05).run(attempt)

    with pytest.raises(EngineUnavailable, match="second"):  # the first to fail is the hedge
        asyncio.run(run())


def test_the_delay_follows_the_answers_within_its_bounds() -> None:
    hedge = Hedge(factor=4, min_s=0.01, max_s=1.0)
    assert hedge.delay() == 0.5  # too few answers yet
    hedge._latencies.extend([0.02] * MIN_SAMPLES)
    assert hedge.delay() == pytest.approx(0.08)
    hedge._latencies.extend([0.001] * 64)
    assert hedge.delay() == 0.01
    hedge._latencies.extend([3.0] * 64)  # slow everywhere: the delay rises, not the load
    assert hedge.delay() == 1.0


def test_only_reads_are_hedged() -> None:
    for method, url in [("POST", "/vs/_search"), ("GET", "/vs/_count"), ("POST", "/vs/_mget"),
                        ("POST", "/_msearch"), ("GET", "/vs/_doc/img-7"),
                        ("POST", "/vs/_search?x=1")]:  # fmt: skip
        assert is_read(method, url), url
    for method, url in [("PUT", "/vs/_doc/img-7"), ("DELETE", "/vs/_doc/img-7"), ("POST", "/_bulk"),
                        ("GET", "/_cat/master"), ("POST", "/vs/_refresh"), ("GET", "/")]:  # fmt: skip
        assert not is_read(method, url), url


def test_the_option_says_auto_seconds_or_off() -> None:
    auto = Hedge.from_option("auto", 5.0)
    assert auto is not None and auto.max_s == 2.5
    fixed = Hedge.from_option("0.3", 5.0)
    assert fixed is not None and fixed.delay() == 0.3
    assert Hedge.from_option("off", 5.0) is None and Hedge.from_option(0, 5.0) is None
    for bad in ("-1", "nan", "inf", "soon"):
        with pytest.raises(ValueError, match="hedge_after must be"):
            Hedge.from_option(bad, 5.0)


@pytest.fixture
def silent_host() -> Iterator[str]:
    """A host that accepts connections and reads requests but never answers."""
    with LoopbackHost() as host:
        yield f"http://{host.address}"


@pytest.mark.elasticsearch
def test_reads_through_a_host_that_never_answers_are_answered_by_the_other(
    es_url: str, silent_host: str
) -> None:
    docs = random_docs(200, 150, seed=5)
    with fresh_index(es_url, "hedge") as index:
        index.upsert(docs)
        queries = random_queries(10, 150, seed=6)
        expected = [index.search(q, k=5, explain=False) for q in queries]
        hosts = f"{es_url},{silent_host}"

        async def run() -> None:
            engine = AsyncElasticsearchIndex(hosts, index.alias, request_timeout=2)
            try:
                hedge = engine.hedge
                assert hedge is not None
                # the first request also checks the server, asking the silent host too (2 s)
                assert await engine.count() == len(docs)
                before = hedge.hedged, hedge.won
                for q, want in zip(queries, expected, strict=True):  # one at a time: every other
                    assert await engine.search(q, k=5, explain=False) == want  # goes to the silent host
                hedged, won = hedge.hedged - before[0], hedge.won - before[1]
                assert 1 <= hedged <= STRIKES and won == hedged  # the silent host never answered
                # then it was given up: the pool leaves it out, no read waits for a hedge any more
                assert len(engine._client.transport.connection_pool.connections) == 1
                for q, want in zip(queries, expected, strict=True):
                    assert await engine.search(q, k=5, explain=False) == want
                assert hedge.hedged - before[0] == hedged
            finally:
                await engine.close()

            unhedged = AsyncElasticsearchIndex(hosts, index.alias, request_timeout=2, hedge_after="off")
            try:
                assert unhedged.hedge is None
                outcomes = await asyncio.gather(
                    *(unhedged.search(q, k=5, explain=False) for q in queries[:4]), return_exceptions=True
                )
                assert any(isinstance(o, EngineUnavailable) for o in outcomes)  # waited out the timeout
                assert all(o in expected for o in outcomes if not isinstance(o, BaseException))
            finally:
                await unhedged.close()

        asyncio.run(run())


@pytest.mark.elasticsearch
def test_a_silent_host_first_in_the_list_does_not_stop_the_server_check(
    es_url: str, silent_host: str
) -> None:
    """The service bounds each call by its timeout, the reader's request timeout too (5 s): the
    server check, which asks each host, must not spend all of it on one that never answers (it
    did: the check began again at every request and nothing was ever answered)."""
    with fresh_index(es_url, "hedge") as index:
        index.upsert(random_docs(20, 50, seed=7))

        async def run() -> None:
            engine = AsyncElasticsearchIndex(f"{silent_host},{es_url}", index.alias, request_timeout=5)
            try:
                assert await asyncio.wait_for(engine.count(), timeout=5) == 20
            finally:
                await engine.close()

        asyncio.run(run())


@pytest.mark.elasticsearch
def test_the_benchmarks_stalling_host_holds_the_requests_it_picks_and_forwards_them(es_url: str) -> None:
    """bench.hedged_reads' hosts slow at random: every request held the stall's seconds when its
    share is 1, none when 0, and the node's answer comes through either way."""
    node = es_url.split("://", 1)[1].rstrip("/")
    for share, at_least, at_most in ((1.0, 1.0, 6.0), (0.0, 0.0, 0.9)):
        with LoopbackHost(node, stall=(share, 1.0)) as host:
            start = time.monotonic()
            with urllib.request.urlopen(f"http://{host.address}/", timeout=10) as answer:
                body = json.load(answer)
            took = time.monotonic() - start
        assert "cluster_uuid" in body and at_least <= took <= at_most, (share, took)
