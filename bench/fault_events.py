"""One fault at a time on a ``fault_cluster.LocalCluster``, measured: injected, held, healed (or the
node restarted), and the time back to green.

Kinds (``KINDS``):

- ``master-cut``: the elected master cut off from both others, both directions;
- ``primary-cut``: a node holding primaries of the served index (not the master) cut off likewise;
- ``one-way``: the master's packets to the others dropped (it hears them; they do not hear it);
- ``slow-link``: every packet between the master and a node holding primaries held for seconds;
- ``kill``: SIGKILL of a node (any role), then restarted.

A cut that isolates the master waits until the other two agree on a new master (each asked for its
own view), then holds the fault ``hold_s`` longer; other faults hold ``hold_s``. Healing is one
flush of this run's chain (``fault_net``); green is asked of every node in turn.
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import asdict, dataclass
from typing import Any

from vsparta.bench.fault_cluster import LocalCluster
from vsparta.bench.fault_net import NetFaults

log = logging.getLogger(__name__)

KINDS = ("master-cut", "primary-cut", "one-way", "slow-link", "kill")
PARTITIONS = ("master-cut", "primary-cut", "one-way")
SLOW_LINK_DELAY_S = 3.0
NEW_MASTER_WITHIN_S = 240.0


@dataclass
class Event:
    kind: str
    node: int  # the node cut off, slowed or killed
    role: str  # "master", "primaries" (holds primaries of the served index) or "other"
    start: float  # monotonic
    old_master: int | None
    new_master: int | None = None
    new_master_s: float | None = None  # from the fault to a majority agreeing on another master
    held_s: float = 0.0
    healed: float = 0.0  # monotonic: rules flushed, or the killed node's start began
    heal_to_green_s: float | None = None
    packets_delayed: int = 0
    error: str = ""

    def row(self, t0: float) -> dict[str, Any]:
        out = asdict(self)
        out["start"] = round(self.start - t0, 1)
        out["healed"] = round(self.healed - t0, 1)
        for key in ("new_master_s", "held_s", "heal_to_green_s"):
            if out[key] is not None:
                out[key] = round(out[key], 1)
        return out


def _role(node: int, master: int | None, holders: dict[int, int]) -> str:
    if node == master:
        return "master"
    return "primaries" if holders.get(node) else "other"


def _wait_new_master(cluster: LocalCluster, old: int | None, event: Event) -> None:
    deadline = event.start + NEW_MASTER_WITHIN_S
    while time.monotonic() < deadline:
        now = cluster.master()
        if now is not None and now != old:
            event.new_master, event.new_master_s = now, time.monotonic() - event.start
            log.info("%s: node %d elected by the majority after %.1fs", event.kind, now, event.new_master_s)
            return
        time.sleep(0.5)
    event.error = f"no new master within {NEW_MASTER_WITHIN_S:.0f}s"


def pick_node(
    kind: str, cluster: LocalCluster, index: str, rng: random.Random
) -> tuple[int, int | None, dict]:
    """(node to hit, master now, primaries per node) for a fault of ``kind``."""
    master = cluster.master()
    holders: dict[int, int] = {}
    for asking in range(cluster.nodes):
        try:
            holders = cluster.primaries(index, asking)
            break
        except OSError:
            continue
    if kind in ("master-cut", "one-way") and master is not None:
        return master, master, holders
    if kind == "primary-cut":
        choices = [n for n in holders if n != master] or [n for n in range(cluster.nodes) if n != master]
        return rng.choice(choices), master, holders
    return rng.randrange(cluster.nodes), master, holders


def run_event(
    kind: str,
    cluster: LocalCluster,
    faults: NetFaults,
    index: str,
    rng: random.Random,
    hold_s: float = 20.0,
) -> Event:
    """Inject one fault of ``kind``, hold it, heal it, wait for green; the measured ``Event``."""
    node, master, holders = pick_node(kind, cluster, index, rng)
    event = Event(kind, node, _role(node, master, holders), time.monotonic(), master)
    addresses = cluster.addresses()
    log.info("%s on node %d (%s)", kind, node, event.role)
    try:
        if kind == "kill":
            cluster.kill(node)
            time.sleep(hold_s)
        else:
            if kind in ("master-cut", "primary-cut"):
                faults.isolate(addresses[node])
            elif kind == "one-way":
                faults.isolate(addresses[node], inbound=False)
            elif kind == "slow-link":
                peer = next((n for n in holders if n != node), (node + 1) % cluster.nodes)
                faults.slow(addresses[node], addresses[peer], SLOW_LINK_DELAY_S)
            else:
                raise ValueError(f"unknown fault kind {kind!r}; one of {', '.join(KINDS)}")
            if node == master and kind in ("master-cut", "one-way"):
                _wait_new_master(cluster, master, event)
            time.sleep(hold_s)
    finally:
        event.held_s = time.monotonic() - event.start
        event.healed = time.monotonic()
        if kind == "kill":
            cluster.start()  # brings the killed node back (the script starts what does not answer)
        else:
            event.packets_delayed = faults.heal()
    cluster.wait_green()
    event.heal_to_green_s = time.monotonic() - event.healed
    if kind == "slow-link" and event.new_master is None:
        now = cluster.master()
        if now is not None and now != master:
            event.new_master = now
    log.info("%s: green %.1fs after healing", kind, event.heal_to_green_s)
    return event
