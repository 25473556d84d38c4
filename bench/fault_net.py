"""Network faults between the nodes of a local test cluster: partitions (one or both directions)
and slow links, by loopback address, in netfilter chains that belong to one run only.

Every node of such a cluster binds its own loopback address (``scripts/elasticsearch.sh
--address``), so a rule ``-s A -d B -j DROP`` drops what node A sends to node B and nothing else.
Two things make that hold here:

- Linux gives a connection to any 127.x address the source 127.0.0.1 (the route's ``src``) unless
  the socket binds one, and the nodes do not bind theirs. Each node runs as its own user, and a
  ``nat`` rule rewrites the source of that user's new connections to our addresses to the node's
  own (``own_sources``). It must be in place before the nodes start: NAT decides once per
  connection.
- Other people's nodes, tests and services on this machine use 127.0.0.1 and other addresses at
  the same time: every rule names our addresses (source and destination) or our users, and sits in
  this run's own chains (``vspf-<pid>-<hex>``, jumped to from INPUT and nat POSTROUTING), so
  healing is one flush and cleaning up one flush and delete. ``clean_stale`` removes the chains of
  runs whose process is gone (a killed test session).

A slow link sends the pair's packets to an NFQUEUE that ``fault_delay.PacketDelay`` holds for
seconds (this kernel has no netem).
"""

from __future__ import annotations

import logging
import os
import random
import re
import secrets
import subprocess
from collections.abc import Iterable

from vsparta.bench.fault_delay import PacketDelay

log = logging.getLogger(__name__)

PREFIX = "vspf-"
_CHAIN = re.compile(rf"^-N ({re.escape(PREFIX)}(\d+)-[0-9a-f]+)$", re.M)
HOOKS = {"filter": "INPUT", "nat": "POSTROUTING"}


def iptables(*args: str, table: str = "filter", check: bool = True) -> subprocess.CompletedProcess[str]:
    """One ``iptables -w`` call (``-w``: wait for the lock other runs may hold)."""
    proc = subprocess.run(["iptables", "-w", "-t", table, *args], capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise RuntimeError(f"iptables -t {table} {' '.join(args)}: {proc.stderr.strip()}")
    return proc


def _remove_chain(table: str, chain: str) -> None:
    while iptables("-D", HOOKS[table], "-j", chain, table=table, check=False).returncode == 0:
        pass
    iptables("-F", chain, table=table, check=False)
    iptables("-X", chain, table=table, check=False)


def clean_stale() -> list[str]:
    """Remove the chains (and their jumps) of runs whose process no longer exists."""
    removed = []
    for table in HOOKS:
        listing = iptables("-S", table=table, check=False).stdout
        for chain, pid in _CHAIN.findall(listing):
            if not os.path.exists(f"/proc/{pid}"):
                _remove_chain(table, chain)
                removed.append(f"{table}/{chain}")
    if removed:
        log.warning("removed network fault rules a killed run left: %s", ", ".join(removed))
    return removed


class NetFaults:
    """This run's rules: ``own_sources`` once, then ``cut``/``slow`` faults, ``heal`` (all faults
    gone at once) and ``close`` (everything gone). Use as a context manager."""

    def __init__(self, addresses: Iterable[str]) -> None:
        self.addresses = sorted(set(addresses))
        if "127.0.0.1" in self.addresses or not all(a.startswith("127.") for a in self.addresses):
            raise ValueError(f"fault rules name only a test cluster's own addresses, got {self.addresses}")
        self.chain = f"{PREFIX}{os.getpid()}-{secrets.token_hex(3)}"
        self._delays: list[PacketDelay] = []
        self._installed: list[str] = []

    def install(self) -> NetFaults:
        clean_stale()
        for table, hook in HOOKS.items():
            iptables("-N", self.chain, table=table)
            self._installed.append(table)
            iptables("-I", hook, "1", "-j", self.chain, table=table)
        return self

    def own_sources(self, users: dict[str, str]) -> None:
        """Connections a node's user opens to our addresses leave from the node's own address
        (``users``: user name -> address)."""
        for user, address in users.items():
            for dest in self.addresses:
                iptables("-A", self.chain, "-o", "lo", "-d", dest, "-m", "owner", "--uid-owner", user,
                         "-j", "SNAT", "--to-source", address, table="nat")  # fmt: skip

    def _check(self, *addresses: str) -> None:
        unknown = [a for a in addresses if a not in self.addresses]
        if unknown:
            raise ValueError(f"{unknown} are not this cluster's addresses {self.addresses}")

    def cut(self, source: str, dest: str, *, reset: bool = False) -> None:
        """Drop every packet ``source`` sends to ``dest`` (one direction); ``reset``: answer TCP
        with a reset instead (connections fail at once rather than time out). A reset itself
        always passes: with both directions cut, the reset that answers one direction's packet
        travels the other, whose rule would swallow it (checked: the link then hangs like a
        drop; a bulk through it once ran into its 120 s timeout in a CI run)."""
        self._check(source, dest)
        reject = ["-j", "REJECT", "--reject-with", "tcp-reset"]
        action = ["-p", "tcp", "!", "--tcp-flags", "RST", "RST", *reject] if reset else ["-j", "DROP"]
        iptables("-A", self.chain, "-s", source, "-d", dest, *action)
        log.info("cut %s -> %s%s", source, dest, " (reset)" if reset else "")

    def isolate(self, node: str, *, inbound: bool = True, outbound: bool = True) -> None:
        """Cut ``node`` off from every other address: what it sends (``outbound``), what it
        receives (``inbound``), or both."""
        for other in self.addresses:
            if other != node:
                if outbound:
                    self.cut(node, other)
                if inbound:
                    self.cut(other, node)

    def slow(self, a: str, b: str, delay_s: float) -> None:
        """Hold every packet between ``a`` and ``b`` (both ways) ``delay_s`` seconds."""
        self._check(a, b)
        delay = self._bind_queue(delay_s)
        for source, dest in ((a, b), (b, a)):
            iptables("-A", self.chain, "-s", source, "-d", dest, "-p", "tcp", "-j", "NFQUEUE",
                     "--queue-num", str(delay.queue), "--queue-bypass")  # fmt: skip
        log.info("slow link %s <-> %s: %.1fs per packet", a, b, delay_s)

    def _bind_queue(self, delay_s: float) -> PacketDelay:
        for _ in range(20):  # queue numbers are machine-wide: another run may hold one
            delay = PacketDelay(random.randrange(10_000, 60_000), delay_s)
            try:
                delay.start()
            except OSError:
                continue
            self._delays.append(delay)
            return delay
        raise RuntimeError("no free NFQUEUE number for a slow link")

    def heal(self) -> int:
        """Every cut and slow link gone (the address rewriting stays); returns packets delayed."""
        iptables("-F", self.chain)
        held = sum(d.held for d in self._delays)
        for delay in self._delays:
            delay.stop()
        self._delays.clear()
        log.info("healed")
        return held

    def close(self) -> None:
        try:
            if "filter" in self._installed:
                self.heal()
        finally:
            for table in self._installed:
                _remove_chain(table, self.chain)
            self._installed.clear()

    def __enter__(self) -> NetFaults:
        return self.install()

    def __exit__(self, *exc: object) -> None:
        self.close()
