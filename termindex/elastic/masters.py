"""Which hosts of a multi-node spec have no master, so that the service's searches leave them out.

A node that has lost its master (cut off from the others, or healed but not yet rejoined) still
answers searches, from its own shard copies and its last cluster state: the engines' default
``cluster.no_master_block: write`` lets reads through. Its copies may be ones the others have moved
past, and a search it coordinates once its links are back answered 200 with documents missing (the
soak on OpenSearch 2.19 saw it: docs/cluster-faults-method.md). Refusing reads in the engine
(``all``) was tried: that block also drops every shard the node holds, and a fault then left the
cluster red. So the reader does it: ``MasterProbe`` asks every host, on that host's own state,
whether it knows a master (``_cat/master?local``, every ``PROBE_EVERY_S``), and
``AsyncCheckedTransport`` picks only hosts whose last answer named one (all of them when none did:
then the engine decides, as before).

Leaving a host out is not enough while the others still list the cut-off node in their cluster
state (until their new master's follower checks drop it): a search they coordinate may still pick
the copies the cut-off node holds, and waits on them (dropped packets, no error) until the node is
dropped or the request times out. So while some host has no master, reads that pick shard copies
(``steer``) prefer the nodes of the hosts that name the master a majority of the hosts name (none
during an election: preferring every host that named a master then sent requests to the cut-off
node's copies). The probe learns each host's node id (``_nodes/_local``) once. Measured in
docs/master-cut-reads/: the first counts after the probe left out the cut-off node answered within
0.1 s; through a healthy node without the preference, 1.3-1.8 s or a timeout.

What it cannot see: the second or so before a probe notices, and the first ~65 s of a cut on this
project's machines (the engines' leader and follower checks at their defaults), until the others
have elected a master and the cut-off node knows it has none: searches the cut-off node
coordinates, or sends to its copies, would wait out their timeout meanwhile (503); a read that
waits longer than a few typical answers is sent again to another host (``elastic.hedging``).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import Counter
from collections.abc import Sequence
from contextvars import ContextVar
from typing import Any

log = logging.getLogger(__name__)
_PROBING: ContextVar[bool] = ContextVar("vsparta_master_probe", default=False)


class _NotWhileProbing(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not _PROBING.get()


logging.getLogger("elasticsearch").addFilter(_NotWhileProbing())  # the client logs failures there

PROBE_EVERY_S = 1.0
PROBE_TIMEOUT_S = 2.0
# The route per product: OpenSearch 2.x calls it cluster_manager (``_cat/master`` still answers,
# with a deprecation warning on every call).
PATHS = {"elasticsearch": "/_cat/master", "opensearch": "/_cat/cluster_manager"}
NODE_ID_PATH = "/_nodes/_local"
# Reads that pick one copy of each shard, and take ``preference`` as a URL parameter (``_msearch``
# takes it in each request's header line instead).
COPY_READS = frozenset({"_search", "_count", "_mget"})


class MasterProbe:
    """The hosts the last look found without a master."""

    def __init__(
        self, product: str, every_s: float = PROBE_EVERY_S, timeout_s: float = PROBE_TIMEOUT_S
    ) -> None:
        self.path = PATHS.get(product, PATHS["elasticsearch"])
        self.every_s = every_s
        self.timeout_s = timeout_s
        self.masterless: frozenset[Any] = frozenset()
        self.named: dict[Any, str] = {}  # host -> the master id it last named ("": none)
        self.node_ids: dict[Any, str] = {}
        self._connections: tuple[Any, ...] = ()

    def usable(self, connection: Any) -> bool:
        return connection not in self.masterless

    @property
    def preference(self) -> str | None:
        """``_prefer_nodes:`` the nodes of the hosts that name the master most hosts name, while some
        host knows none. None otherwise: the engine picks copies by its adaptive replica selection,
        as before. Without a majority (an election under way: the old master still names itself, a
        follower names the new one, which names none yet) the hosts that name one are no safer
        than the others, and preferring them sent shard requests to the cut-off node (measured)."""
        if not self.masterless:
            return None
        named = [self.named.get(c, "") for c in self._connections]
        counts = Counter(m for m in named if m)
        if not counts:
            return None
        master, votes = counts.most_common(1)[0]
        if 2 * votes <= len(self._connections):
            return None
        ids = sorted({self.node_ids[c] for c, m in zip(self._connections, named, strict=True)
                      if m == master and c in self.node_ids})  # fmt: skip
        return "_prefer_nodes:" + ",".join(ids) if ids else None

    async def look(self, connections: Sequence[Any]) -> None:
        """Ask every host at once; one that does not answer keeps its last verdict (the client's
        own dead-host marking deals with hosts that do not answer)."""
        self._connections = tuple(connections)
        unnamed = [c for c in connections if c not in self.node_ids]
        verdicts, ids = await asyncio.gather(
            asyncio.gather(*(self._master_named(c) for c in connections)),
            asyncio.gather(*(self._node_id(c) for c in unnamed)),
        )
        self.node_ids.update({c: i for c, i in zip(unnamed, ids, strict=True) if i is not None})
        self.named.update({c: v for c, v in zip(connections, verdicts, strict=True) if v is not None})
        masterless = {c for c, v in zip(connections, verdicts, strict=True) if v == ""}
        unknown = {c for c, v in zip(connections, verdicts, strict=True) if v is None}
        masterless |= set(self.masterless) & unknown
        if masterless != set(self.masterless):
            log.warning(
                "searches leave out hosts without a master: %s",
                ", ".join(sorted(getattr(c, "host", str(c)) for c in masterless)) or "none now",
            )
        self.masterless = frozenset(masterless)

    async def _get_json(self, connection: Any, path: str, params: dict[str, str]) -> Any:
        """One GET's JSON body, or None when the host does not answer or the body is not JSON."""
        try:
            answer = await connection.perform_request("GET", path, params=params, timeout=self.timeout_s)
            return json.loads(answer[2])
        except Exception:  # noqa: BLE001 - not answering, or not readable: no verdict
            return None

    async def _master_named(self, connection: Any) -> str | None:
        """The id of the master the host knows ("": none), or None when it does not answer."""
        rows = await self._get_json(connection, self.path, {"local": "true", "format": "json", "h": "id"})
        if not isinstance(rows, list) or not rows or not isinstance(rows[0], dict):
            return None
        named = rows[0].get("id")
        return "" if named in (None, "", "-") else str(named)

    async def _node_id(self, connection: Any) -> str | None:
        """The id of the node this host is (None: no answer yet; asked again next look)."""
        found = await self._get_json(connection, NODE_ID_PATH, {"filter_path": "nodes.*.name"})
        nodes = found.get("nodes") if isinstance(found, dict) else None
        return next(iter(nodes)) if isinstance(nodes, dict) and len(nodes) == 1 else None

    async def run(self, connections: Sequence[Any]) -> None:
        """Look every ``every_s`` until cancelled (the client's own log lines of a host that does
        not answer are left out: one a second would bury the service's log)."""
        _PROBING.set(True)  # this task's context only
        while True:
            await self.look(connections)
            await asyncio.sleep(self.every_s)


def read_kind(method: str, url: str) -> str | None:
    """What a request reads: "copies" (one copy of each shard: ``COPY_READS``, a document GET),
    "_msearch" (several searches), or None (not a read). The one home of "which requests only
    read", for ``steer`` and for ``elastic.hedging``."""
    if method not in ("GET", "POST"):
        return None
    path = url.split("?", 1)[0].rstrip("/")
    last = path.rsplit("/", 1)[-1]
    if last in COPY_READS or (method == "GET" and "/_doc/" in path):
        return "copies"
    return "_msearch" if last == "_msearch" else None


def steer(
    preference: str | None, method: str, url: str, params: dict[str, Any] | None, body: Any
) -> tuple[dict[str, Any] | None, Any]:
    """A read's ``params`` and ``body`` with ``preference`` set where it picks shard copies (its own
    choice, when it has one, stands): the ``MasterProbe.preference`` rule's one home."""
    kind = read_kind(method, url)
    if preference is None or kind is None:
        return params, body
    if kind == "copies":
        if params and "preference" in params:
            return params, body
        return {**(params or {}), "preference": preference}, body
    if isinstance(body, str | bytes):  # _msearch
        return params, _msearch_preferring(preference, body)
    return params, body


def _msearch_preferring(preference: str, body: str | bytes) -> str | bytes:
    """Each header line (every other line, from the first) with ``preference`` unless it has one."""
    text = body.decode() if isinstance(body, bytes) else body
    lines = text.split("\n")
    for i in range(0, len(lines) - 1, 2):
        header = json.loads(lines[i] or "{}")
        header.setdefault("preference", preference)
        lines[i] = json.dumps(header, separators=(",", ":"))
    out = "\n".join(lines)
    return out.encode() if isinstance(body, bytes) else out
