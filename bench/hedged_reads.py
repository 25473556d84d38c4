"""What hedged reads (``termindex.elastic.hedging``) buy and cost: the service's reader searching a
real node through host lists with a second host that forwards to it, or that takes requests and
never answers (as a node cut off from its cluster does until the others notice, ~65 s).

    python -m bench.hedged_reads --es-url http://127.0.0.1:9200 --out-dir docs/hedged-reads

Rows: one host (the floor); two healthy hosts, hedged (what hedging costs when nothing is wrong:
the share of reads sent twice); a silent second host without and with hedging; two hosts that each
hold a share of requests for a second (slow everywhere, no host slow enough to be given up: where
the hedge's budget, not the strikes, bounds what is sent twice). Each row runs the
same searches, ``--concurrency`` at a time, under the service's engine timeout (5 s), and reports
latency percentiles, failures (the service's 503) and the reads sent twice. A first pass of the
searches on one host, not counted, warms the node.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import random
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from vsparta.bench.written import publish

log = logging.getLogger("vsparta.bench.hedged_reads")


class LoopbackHost:
    """A host on 127.0.0.1 that forwards every connection to ``target`` ("HOST:PORT"), or, without
    one, accepts connections and reads requests but never answers. Runs in a thread of its own.
    ``stall``: (share, seconds): that share of the requests it forwards held that long first."""

    def __init__(
        self, target: str | None = None, stall: tuple[float, float] = (0.0, 0.0), seed: int = 0
    ) -> None:
        self.target = target
        self.stall = stall
        self._rng = random.Random(seed)
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.AbstractServer | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    @property
    def address(self) -> str:
        """HOST:PORT"""
        assert self._server is not None
        return f"127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    def __enter__(self) -> LoopbackHost:
        self._thread.start()
        start = asyncio.start_server(self._serve, "127.0.0.1", 0, family=socket.AF_INET)
        self._server = asyncio.run_coroutine_threadsafe(start, self._loop).result()
        return self

    def __exit__(self, *exc: object) -> None:
        async def stop() -> None:
            assert self._server is not None
            self._server.close()
            tasks = asyncio.all_tasks() - {asyncio.current_task()}
            for task in tasks:
                task.cancel()
            # let each connection close its sockets while the loop still runs (not at garbage collection)
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            if self.target is None:
                while await reader.read(65536):  # read, never answer
                    pass
                return
            host, port = self.target.rsplit(":", 1)
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
            try:
                await asyncio.gather(_pipe(reader, up_writer, self._held), _pipe(up_reader, writer))
            finally:
                up_writer.close()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    def _held(self) -> float:
        share, seconds = self.stall
        return seconds if share and self._rng.random() < share else 0.0


async def _pipe(
    src: asyncio.StreamReader, dst: asyncio.StreamWriter, held: Callable[[], float] | None = None
) -> None:
    while data := await src.read(65536):
        if held is not None and (seconds := held()):
            await asyncio.sleep(seconds)
        dst.write(data)
        await dst.drain()
    dst.close()


def _documents(n: int, vocab: int, seed: int) -> Iterator[Any]:
    from vsparta.termindex.base import TermDocument

    rng = np.random.default_rng(seed)
    popularity = 1.0 / np.arange(1, vocab + 1) ** 1.1
    popularity /= popularity.sum()
    for i in range(n):
        terms = rng.choice(vocab, size=60, replace=False, p=popularity)
        weights = np.exp(rng.normal(-0.5, 1.2, size=60))
        yield TermDocument(
            f"doc-{i:06d}", {int(t): float(w) for t, w in zip(terms, weights, strict=True)}, {}
        )


def _queries(n: int, vocab: int, seed: int) -> list[dict[int, float]]:
    rng = np.random.default_rng(seed)
    return [
        {int(t): 1.0 for t in rng.integers(0, vocab // 4, size=int(rng.integers(2, 6)))} for _ in range(n)
    ]


async def _run_row(hosts: str, alias: str, queries: list[dict[int, float]], args: argparse.Namespace,
                   hedge_after: str) -> dict[str, Any]:  # fmt: skip
    from vsparta.service.engines import ServiceEngine
    from vsparta.termindex import registry
    from vsparta.termindex.elastic.index import AsyncElasticsearchIndex
    from vsparta.termindex.errors import EngineUnavailable

    spec = registry.parse_spec(f"http://{hosts}/{alias}")
    reader = AsyncElasticsearchIndex(
        spec.location, alias, request_timeout=args.timeout, hedge_after=hedge_after
    )
    engine = ServiceEngine(reader, args.timeout, None, registry.engine_of(spec))
    latencies: list[float] = []
    failures = 0
    gate = asyncio.Semaphore(args.concurrency)
    with contextlib.suppress(EngineUnavailable):
        await engine.count()  # the server check (it asks every host, the silent one for a timeout)
    hedge = reader.hedge
    before = (hedge.reads, hedge.hedged, hedge.throttled) if hedge else (0, 0, 0)

    async def one(query: dict[int, float]) -> None:
        nonlocal failures
        async with gate:
            start = time.perf_counter()
            try:
                await engine.search(query, k=10, explain=False)
            except EngineUnavailable:
                failures += 1
                return
            latencies.append(time.perf_counter() - start)

    start = time.perf_counter()
    await asyncio.gather(*(one(q) for q in queries))
    wall = time.perf_counter() - start
    reads, hedged = (hedge.reads - before[0], hedge.hedged - before[1]) if hedge else (len(queries), 0)
    throttled = hedge.throttled - before[2] if hedge else 0
    await engine.close()
    ms = np.array(latencies) * 1000 if latencies else np.array([float("nan")])
    return {
        "searches": len(queries), "failed": failures, "wall_s": wall, "reads": reads, "sent_twice": hedged,
        "not_sent_twice_budget": throttled,
        "p50_ms": float(np.percentile(ms, 50)), "p95_ms": float(np.percentile(ms, 95)),
        "p99_ms": float(np.percentile(ms, 99)), "max_ms": float(ms.max()),
    }  # fmt: skip


def measure(args: argparse.Namespace) -> dict[str, Any]:
    from vsparta.termindex.elastic.index import ElasticsearchIndex

    alias = f"bench-hedge-{int(time.time())}"
    index = ElasticsearchIndex(args.es_url, alias, create=True)
    try:
        index.upsert(list(_documents(args.docs, args.vocab, seed=1)))
        queries = _queries(args.searches, args.vocab, seed=2)
        node = args.es_url.split("://", 1)[1].rstrip("/")
        rows = []
        stall = (0.2, 1.0)  # a fifth of the requests held a second, on both hosts
        with (
            LoopbackHost(node) as forward,
            LoopbackHost() as silent,
            LoopbackHost(node, stall, seed=1) as slow_a,
            LoopbackHost(node, stall, seed=2) as slow_b,
        ):
            both_slow = f"{slow_a.address},{slow_b.address}"
            plans = [
                ("one host", node, "auto"),
                ("two healthy hosts (one forwards), hedged", f"{node},{forward.address}", "auto"),
                ("a silent second host, not hedged", f"{node},{silent.address}", "off"),
                ("a silent second host, hedged", f"{node},{silent.address}", "auto"),
                ("two hosts each holding 20 % of requests 1 s, not hedged", both_slow, "off"),
                ("two hosts each holding 20 % of requests 1 s, hedged (budget 10 %)", both_slow, "auto"),
            ]  # fmt: skip
            asyncio.run(_run_row(node, alias, queries, args, "off"))  # warms the node: not counted
            for name, hosts, hedge_after in plans:
                row = asyncio.run(_run_row(hosts, alias, queries, args, hedge_after))
                log.info("%s: %s", name, row)
                rows.append({"row": name, "hedge_after": hedge_after, **row})
    finally:
        index.drop()
        index.close()
    return {"docs": args.docs, "concurrency": args.concurrency, "timeout_s": args.timeout, "rows": rows}


def markdown(result: dict[str, Any], command: str) -> str:
    floor = result["rows"][0]["p99_ms"]
    lines = [
        "# Hedged reads: a second host that is healthy, or silent",
        "",
        f"Command: `{command}`",
        "",
        f"{result['docs']:,} documents on one Elasticsearch node; each row runs the same searches, "
        f"{result['concurrency']} at a time, under the service's engine timeout ({result['timeout_s']:g} s). "
        "Failed: searches that ran out of time (the service's 503). Sent twice: reads hedged; budget: "
        "slow reads not sent twice because the hedge's budget (10 % of reads, a burst of 10) was spent.",
        "",
        "| host list | searches | failed | sent twice | budget | p50 ms | p95 ms | p99 ms | max ms"
        " | p99 / one host's |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        lines.append(
            f"| {r['row']} | {r['searches']} | {r['failed']}"
            f" | {r['sent_twice']} ({r['sent_twice'] / max(r['reads'], 1):.0%})"
            f" | {r.get('not_sent_twice_budget', 0)}"
            f" | {r['p50_ms']:.1f} | {r['p95_ms']:.1f} | {r['p99_ms']:.1f} | {r['max_ms']:.1f}"
            f" | {r['p99_ms'] / floor:.1f}x |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--es-url", default="http://127.0.0.1:9200", help="a running node (default %(default)s)")
    p.add_argument("--docs", type=int, default=20_000, help="documents indexed (default 20,000)")
    p.add_argument("--vocab", type=int, default=5_000, help="distinct terms (default 5,000)")
    p.add_argument("--searches", type=int, default=400, help="searches per row (default 400)")
    p.add_argument("--concurrency", type=int, default=4, help="searches at a time (default 4)")
    p.add_argument("--timeout", type=float, default=5.0, help="engine timeout in s (the service's: 5)")
    p.add_argument("--out-dir", type=Path, help="write hedged-reads.{md,json} here")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return publish("hedged_reads", "hedged-reads", measure(args), markdown, argv, args.out_dir)


if __name__ == "__main__":
    sys.exit(main())
