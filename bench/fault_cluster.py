"""A local cluster of Elasticsearch or OpenSearch nodes to break: started by
``scripts/elasticsearch.sh --nodes N --address A``, every node on its own loopback address and
ports, run as its own user (``fault_net`` cuts nodes apart by address), killed by pid.

What a fault run asks of it: which node is the master (each node's own view, ``local=true``, so
a cut-off node answers for itself), which nodes hold primaries, how long until green.

A run killed outright (SIGKILL; a SIGTERM tears down like Ctrl-C, ``tests/signal_teardown.py``)
leaves its nodes running: each cluster's work dir says which address block it holds
(``cluster.json``), and ``reap_stale`` stops the nodes of every work dir whose block's lock no
live process holds, as ``fault_net.clean_stale`` removes such a run's netfilter chains.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

log = logging.getLogger(__name__)

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "elasticsearch.sh"
# Engine line -> (the script's flags, the engine that opens its indices).
LINES: dict[str, tuple[list[str], str]] = {
    "elasticsearch-7.17": ([], "elasticsearch"),
    "opensearch-2.19": (["--distribution", "opensearch", "--version", "2"], "opensearch"),
    "opensearch-3.x": (["--distribution", "opensearch", "--version", "3"], "opensearch"),
}
# First addresses of the blocks a run may take: 127.0.0.21, .24, ... (never 127.0.0.1, which
# everybody's own nodes and services use). A lock file per block keeps two runs off one block.
BLOCKS = [f"127.0.0.{d}" for d in range(21, 250, 3)]
LOCKS = Path("/tmp")
# Clusters' work dirs: /var/tmp, not a private /tmp, since the nodes' users must reach them.
HOMES = Path("/var/tmp")
HOME_PREFIX = "vsparta-es-cluster-"
STATE = "cluster.json"  # in a work dir: the engine line, node count, ports and address block


def new_home(homes: Path = HOMES) -> Path:
    """A fresh work dir for one cluster, readable by its nodes' users."""
    home = Path(tempfile.mkdtemp(prefix=HOME_PREFIX, dir=homes))
    home.chmod(0o755)
    return home


def _lock_file(first: str) -> TextIO:
    return (LOCKS / f"vsparta-cluster-{first}.lock").open("w")


def _try_lock(lock: TextIO) -> bool:
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


def _listening_addresses() -> set[str]:
    """Local addresses with a TCP socket on them (any state), from /proc/net/tcp."""
    found = set()
    with contextlib.suppress(OSError), open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            hex_ip = line.split()[1].split(":")[0]
            found.add(socket.inet_ntoa(bytes.fromhex(hex_ip)[::-1]))
    return found


def _port_free(address: str, port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((address, port))
        except OSError:
            return False
    return True


@dataclass
class Node:
    index: int
    port: int
    address: str
    user: str
    pid: int | None


@dataclass
class LocalCluster:
    """``nodes`` nodes of one engine line; ``start()`` takes a free address block and ports."""

    line: str
    home: Path
    nodes: int = 3
    heap: str = "384m"
    base: int = 0
    address: str = ""
    green_s: list[float] = field(default_factory=list)
    _lock: TextIO | None = None

    @property
    def engine(self) -> str:
        return LINES[self.line][1]

    def addresses(self) -> list[str]:
        head, last = self.address.rsplit(".", 1)
        return [f"{head}.{int(last) + i}" for i in range(self.nodes)]

    def _claim(self) -> None:
        """A block of addresses nobody uses (no socket on them, no other run's lock), free ports."""
        busy = _listening_addresses()
        for first in random.sample(BLOCKS, len(BLOCKS)):
            self.address = first
            if any(a in busy for a in self.addresses()):
                continue
            lock = _lock_file(first)
            if not _try_lock(lock):
                lock.close()
                continue
            self._lock = lock
            break
        else:
            raise RuntimeError("no free block of loopback addresses for a test cluster")
        for _ in range(200):
            base = random.randrange(20_000, 40_000)
            pairs = [(a, base + i) for i, a in enumerate(self.addresses())]
            if all(_port_free(a, p) and _port_free(a, p + 100) for a, p in pairs):
                self.base = base
                return
        raise RuntimeError("no free ports for a test cluster")

    def script(self, *args: str, timeout: float = 420) -> subprocess.CompletedProcess[str]:
        flags = LINES[self.line][0]
        argv = ["bash", str(SCRIPT), *args, *flags, "--nodes", str(self.nodes), "--base-port", str(self.base),
                "--address", self.address]  # fmt: skip
        env = os.environ | {"VSPARTA_ES_HOME": str(self.home), "VSPARTA_ES_HEAP": self.heap,
                            "VSPARTA_ES_TIMEOUT": "400"}  # fmt: skip
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)

    def users(self) -> dict[str, str]:
        """The user each node runs as -> its address, created now (a rule may name them before
        the nodes start)."""
        res = self.script("users")
        if res.returncode != 0:
            raise RuntimeError(f"could not create the nodes' users: {res.stderr[-2000:]}")
        return {user: address for address, user in (line.split() for line in res.stdout.splitlines())}

    def claim(self) -> LocalCluster:
        if not self.address:
            self._claim()
            state = {"line": self.line, "nodes": self.nodes, "base": self.base, "address": self.address}
            (self.home / STATE).write_text(json.dumps(state))
        return self

    @classmethod
    def reap_stale(cls, homes: Path = HOMES) -> list[str]:
        """Stop the nodes of clusters whose run is gone (nobody holds their block's lock) and
        remove their work dirs; returns the address blocks reaped. A live run keeps its lock
        from ``claim`` to ``stop``, so its cluster is never touched."""
        reaped = []
        for home in sorted(homes.glob(f"{HOME_PREFIX}*")):
            with contextlib.suppress(OSError, ValueError, KeyError):
                state = json.loads((home / STATE).read_text())
                lock = _lock_file(state["address"])
                if not _try_lock(lock):
                    lock.close()
                    continue
                stale = cls(state["line"], home, nodes=state["nodes"], base=state["base"],
                            address=state["address"], _lock=lock)  # fmt: skip
                stale.stop()
                shutil.rmtree(home, ignore_errors=True)
                reaped.append(state["address"])
        if reaped:
            log.warning("stopped the nodes a killed run left, at %s", ", ".join(reaped))
        return reaped

    def start(self) -> float:
        """Start the nodes that are down and wait for green with all of them; seconds taken."""
        self.claim()
        t0 = time.monotonic()
        res = self.script("start")
        if res.returncode != 0:
            raise RuntimeError(f"the cluster did not start:\n{res.stderr[-3000:]}")
        self.wait_voters()
        took = time.monotonic() - t0
        log.info("%s cluster green after %.1fs", self.line, took)
        return took

    def wait_voters(self, timeout_s: float = 60) -> None:
        """Wait until the committed voting configuration is every node: a cluster bootstraps with
        a placeholder for a node it has not yet found, and until that is replaced the loss of one
        node can leave the other two short of a majority (no master, whatever the fault)."""
        t0 = time.monotonic()
        deadline = t0 + timeout_s
        voters: set[str] = set()
        nodes: set[str] = set()
        while time.monotonic() < deadline:
            with contextlib.suppress(urllib.error.URLError, OSError, ValueError, KeyError):
                nodes = set(self.get(0, "/_nodes?filter_path=nodes.*.name")["nodes"])
                path = "/_cluster/state/metadata?filter_path=metadata.cluster_coordination"
                voters = set(self.get(0, path)["metadata"]["cluster_coordination"]["last_committed_config"])
                if len(nodes) == self.nodes and voters == nodes:
                    log.info("%s: every node votes, after %.1fs", self.line, time.monotonic() - t0)
                    return
            time.sleep(0.5)
        raise TimeoutError(
            f"{self.line}: the voting configuration {sorted(voters)} is not the nodes {sorted(nodes)}"
        )

    def stop(self) -> None:
        if self.address:
            self.script("stop", timeout=180)
        self.release()

    def release(self) -> None:
        """Give the address block back (its lock file)."""
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def members(self) -> list[Node]:
        out = []
        for i, line in enumerate(self.script("nodes").stdout.split("\n")[: self.nodes]):
            port, address, user, pid = line.split()
            out.append(Node(i, int(port), address, user, None if pid == "-" else int(pid)))
        return out

    def url(self, i: int) -> str:
        return f"http://{self.addresses()[i]}:{self.base + i}"

    def hosts(self, nodes: list[int] | None = None) -> str:
        """``ADDRESS:PORT`` of ``nodes`` (default: all), comma-separated."""
        chosen = range(self.nodes) if nodes is None else nodes
        return ",".join(f"{self.addresses()[i]}:{self.base + i}" for i in chosen)

    def spec(self, name: str, nodes: list[int] | None = None) -> str:
        """A backend spec of the index ``name`` over ``nodes`` (default: every node)."""
        prefix = "" if self.engine == "elasticsearch" else f"{self.engine}+"
        return f"{prefix}http://{self.hosts(nodes)}/{name}"

    def node_of(self, name: str) -> int | None:
        """The index of the node named ``vsparta-PORT``."""
        port = int(name.rsplit("-", 1)[1]) if name.startswith("vsparta-") else -1
        return port - self.base if 0 <= port - self.base < self.nodes else None

    def get(self, i: int, path: str, timeout: float = 5) -> Any:
        with urllib.request.urlopen(f"{self.url(i)}{path}", timeout=timeout) as r:
            return json.load(r)

    def logs(self, lines: int = 40) -> str:
        """The last ``lines`` of every node's log: what a failed fault test shows, since the
        nodes' work dir is gone once the session ends."""
        res = self.script("logs", str(lines), timeout=60)
        return res.stdout + res.stderr

    def master_seen_by(self, i: int) -> int | None:
        """The master in node ``i``'s own cluster state (None: it knows none, or does not answer)."""
        try:
            rows = self.get(i, "/_cat/master?format=json&local=true", timeout=3)
        except (urllib.error.URLError, OSError, ValueError):
            return None
        name = rows[0].get("node") if rows else None
        return self.node_of(str(name)) if name else None

    def master(self) -> int | None:
        """The master a majority of the nodes agree on, or None."""
        seen = [self.master_seen_by(i) for i in range(self.nodes)]
        for m in set(seen) - {None}:
            if 2 * seen.count(m) > self.nodes:
                return m
        return None

    def primaries(self, index: str, asking: int = 0) -> dict[int, int]:
        """Node -> how many primaries of ``index`` (an alias or a pattern) it holds."""
        rows = self.get(asking, f"/_cat/shards/{index}?format=json&h=prirep,node,state")
        held: dict[int, int] = {}
        for r in rows:
            node = self.node_of(str(r.get("node") or ""))
            if r["prirep"] == "p" and node is not None:
                held[node] = held.get(node, 0) + 1
        return held

    def health(self, asking: int = 0, wait_for: str | None = None, timeout_s: int = 120) -> dict[str, Any]:
        query = ""
        if wait_for:
            query = f"?wait_for_status={wait_for}&wait_for_nodes={self.nodes}&timeout={timeout_s}s"
        return self.get(asking, f"/_cluster/health{query}", timeout=timeout_s + 10)

    def wait_green(self, timeout_s: float = 300) -> float:
        """Seconds until a node reports green with every node joined (each node asked in turn:
        one may still be cut off or down)."""
        t0 = time.monotonic()
        while True:
            for i in range(self.nodes):
                with contextlib.suppress(urllib.error.URLError, OSError, ValueError):
                    h = self.health(i, wait_for="green", timeout_s=5)
                    if h.get("status") == "green" and not h.get("timed_out"):
                        took = time.monotonic() - t0
                        self.green_s.append(took)
                        return took
            if time.monotonic() - t0 > timeout_s:
                raise TimeoutError(f"{self.line} cluster not green within {timeout_s:.0f}s")
            time.sleep(0.2)

    def kill(self, i: int) -> None:
        """SIGKILL node ``i`` and wait until its process is gone."""
        pid = self.members()[i].pid
        if pid is None:
            return
        os.kill(pid, signal.SIGKILL)
        for _ in range(200):
            try:
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                break
            if state in ("Z", "X"):
                break
            time.sleep(0.05)
        log.info("killed node %d (pid %d)", i, pid)
