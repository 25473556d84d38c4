"""Reads during a master cut, second by second: what the reader's probe sees, whether the healthy
nodes still list the cut-off node, and how a count fares through the service's reader (steered by
``termindex/elastic/masters.py``) and through a healthy node without a preference.

Run from the repository root as root after ``bash scripts/install-system-deps.sh`` (a local 3-node
cluster on its own loopback addresses, cut with iptables as in
``tests/termindex/test_elastic_masters.py``):

    .venv/bin/python docs/master-cut-reads/master_cut_reads.py \\
        elasticsearch-7.17 docs/master-cut-reads 3 first

Cuts the master 3 times; ``first`` counts from the moment the probe leaves out exactly the cut-off
node, ``continuous`` from the cut (``_cut``). Writes ``master-cut-reads-LINE-MODE.json`` (a row each
second, or each count timeout) and ``.md`` (the summary by phase). A fifth argument ``unhedged``
turns the reader's hedged reads off (``termindex/elastic/hedging.py``; ``hedged``, the default,
leaves them on) and adds ``-unhedged`` or ``-hedged`` to the names.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "termindex"))
from elastic_testkit import SearchServer, open_on, random_docs  # noqa: E402

from vsparta.bench.fault_cluster import LocalCluster, new_home  # noqa: E402
from vsparta.bench.fault_net import NetFaults  # noqa: E402
from vsparta.termindex.registry import open_reader  # noqa: E402

WATCH_S = 100
TIMEOUT_S = 4


def _get(cluster: LocalCluster, i: int, path: str) -> Any:
    with urllib.request.urlopen(f"{cluster.url(i)}{path}", timeout=TIMEOUT_S) as r:
        return json.load(r)


def _node(cluster: LocalCluster, host: str) -> int:
    return int(host.rsplit(":", 1)[1]) - cluster.base


def _plain_count(cluster: LocalCluster, i: int) -> str:
    try:
        return str(_get(cluster, i, "/probe/_count")["count"])
    except Exception as err:  # noqa: BLE001 - what failed is the row's answer
        return type(err).__name__


async def _count(reader: Any) -> tuple[Any, float]:
    start = time.monotonic()
    try:
        return await reader.count(), time.monotonic() - start
    except Exception as err:  # noqa: BLE001 - what failed is the row's answer
        return type(err).__name__, time.monotonic() - start


async def _timed_plain(cluster: LocalCluster, node: int) -> tuple[str, float]:
    start = time.monotonic()
    return await asyncio.to_thread(_plain_count, cluster, node), time.monotonic() - start


async def _cut(
    cut: int, cluster: LocalCluster, faults: NetFaults, reader: Any, mode: str
) -> list[dict[str, Any]]:
    """One cut of the master from both others, watched for ``WATCH_S``, then healed and rejoined.
    ``continuous``: counts every second from the cut; ``first``: none until the probe leaves out
    exactly the cut-off node (what a quiet service meets: the engine's adaptive replica selection
    has not yet seen requests to the cut-off node hang), then every second."""
    probe = reader._client.transport.masters
    master = cluster.master()
    assert master is not None
    others = [n for n in range(cluster.nodes) if n != master]
    addresses = cluster.addresses()
    t0 = time.monotonic()
    for other in others:
        faults.cut(addresses[master], addresses[other])
        faults.cut(addresses[other], addresses[master])
    rows: list[dict[str, Any]] = []
    counting = mode == "continuous"
    while time.monotonic() - t0 < WATCH_S:
        seen = await asyncio.to_thread(lambda: [cluster.master_seen_by(i) for i in range(cluster.nodes)])
        try:
            state = await asyncio.to_thread(_get, cluster, others[0], "/_cluster/state/nodes?local=true")
            listed: Any = len(state["nodes"])
        except Exception:  # noqa: BLE001
            listed = None
        left_out = sorted(_node(cluster, c.host) for c in probe.masterless)
        first = not counting and left_out == [master]
        counting = counting or first
        if not counting:
            await asyncio.sleep(0.5)
            continue
        preference = probe.preference
        t = time.monotonic() - t0
        steered, *plain = await asyncio.gather(_count(reader), *(_timed_plain(cluster, o) for o in others))
        rows.append({
            "cut": cut, "t_s": round(t, 1), "first": first, "cut_off": master, "master_seen_by": seen,
            "nodes_a_healthy_node_lists": listed, "probe_leaves_out": left_out, "preference": preference,
            "reader_count": steered[0], "reader_s": round(steered[1], 2),
            "reads_sent_twice": getattr(reader._client.transport.hedge, "hedged", 0),
            "plain_counts_via_healthy_nodes": [p[0] for p in plain],
            "plain_s": [round(p[1], 2) for p in plain],
        })  # fmt: skip
        print(rows[-1], flush=True)
        await asyncio.sleep(1)
    faults.heal()
    while cluster.master_seen_by(master) is None or probe.masterless:
        await asyncio.sleep(1)
    await asyncio.to_thread(cluster.wait_green)
    return rows


async def _watch(
    cluster: LocalCluster, faults: NetFaults, cuts: int, mode: str, hedge: str
) -> list[dict[str, Any]]:
    reader = open_reader(cluster.spec("probe"), request_timeout=TIMEOUT_S)
    if hedge == "unhedged":
        reader._client.transport.hedge = None
    try:
        assert await reader.count() == 60
        rows = []
        for cut in range(cuts):
            await asyncio.sleep(2.5)
            rows += await _cut(cut, cluster, faults, reader, mode)
        return rows
    finally:
        await reader.close()


def _answered(part: list[dict[str, Any]]) -> tuple[str, str]:
    """How many counts answered, and the slowest answer's seconds."""
    if not part:
        return "-", "-"
    reader = [r["reader_s"] for r in part if r["reader_count"] == 60]
    plain = [
        (c == "60", t)
        for r in part
        for c, t in zip(r["plain_counts_via_healthy_nodes"], r["plain_s"], strict=True)
    ]
    slowest = max((t for ok, t in plain if ok), default=0.0)
    return (
        f"{len(reader)}/{len(part)} (<= {max(reader, default=0.0):.2f} s)",
        f"{sum(ok for ok, _ in plain)}/{len(plain)} (<= {slowest:.2f} s)",
    )


def _summary(rows: list[dict[str, Any]]) -> str:
    phases = {
        "the first read once the probe leaves out the cut-off node only": [r for r in rows if r["first"]],
        "no node knows yet (probe sees nothing)": [r for r in rows if not r["probe_leaves_out"]],
        "probe leaves out the cut-off node only, healthy nodes still list it": [
            r
            for r in rows
            if r["probe_leaves_out"] == [r["cut_off"]] and r["nodes_a_healthy_node_lists"] == 3
        ],
        "probe leaves out the cut-off node only, healthy nodes dropped it": [
            r
            for r in rows
            if r["probe_leaves_out"] == [r["cut_off"]] and r["nodes_a_healthy_node_lists"] == 2
        ],
        "probe leaves out a healthy node (elections in flight)": [
            r for r in rows if r["probe_leaves_out"] and r["probe_leaves_out"] != [r["cut_off"]]
        ],
    }
    lines = [
        "| phase | seconds after the cut | reader count answered (slowest) | plain counts via each healthy "
        "node answered (slowest) |",
        "|---|---|---|---|",
    ]
    for name, part in phases.items():
        times = [r["t_s"] for r in part]
        span = f"{min(times):.0f}-{max(times):.0f}" if part else "-"
        reader, plain = _answered(part)
        lines.append(f"| {name} | {span} | {reader} | {plain} |")
    return "\n".join(lines)


def main(line: str, out: Path, cuts: int, mode: str, hedge: str | None = None) -> None:
    home = new_home()
    cluster = LocalCluster(line, home).claim()
    faults = NetFaults(cluster.addresses()).install()
    try:
        faults.own_sources(cluster.users())
        cluster.start()
        with open_on(
            SearchServer(cluster.engine, f"http://{cluster.hosts()}"), "probe", create=True
        ) as index:
            index.upsert(random_docs(60, 300, seed=1))
        rows = asyncio.run(_watch(cluster, faults, cuts, mode, hedge or "hedged"))
    finally:
        faults.heal()
        faults.close()
        cluster.stop()
        shutil.rmtree(home, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    name = f"master-cut-reads-{line}-{mode}" + (f"-{hedge}" if hedge else "")
    (out / f"{name}.json").write_text(json.dumps(rows, indent=1) + "\n")
    table = _summary(rows)
    (out / f"{name}.md").write_text(
        f"# Reads during a master cut ({line})\n\n`{' '.join(['python', *sys.argv])}`; "
        f"{cuts} cuts of the master, each watched {WATCH_S} s, counting {mode} (see the script); counts "
        f"time out after {TIMEOUT_S} s; the reader's count and a plain count through each healthy node "
        f"(no preference) run at once, a row a second.\n\n{table}\n"
    )
    print(table)


def resummarise(json_path: Path) -> None:
    """Rewrite the table of the ``.md`` beside ``json_path`` from its rows (the header line stays)."""
    md = json_path.with_suffix(".md")
    head = md.read_text().split("\n\n| phase", 1)[0]
    md.write_text(f"{head}\n\n{_summary(json.loads(json_path.read_text()))}\n")


if __name__ == "__main__":
    if sys.argv[1] == "resummarise":
        for path in sys.argv[2:]:
            resummarise(Path(path))
        sys.exit(0)
    main(sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), *(sys.argv[4:6] or ["first"]))
