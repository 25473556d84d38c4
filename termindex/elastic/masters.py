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

What it cannot see: the second or so before a probe notices, and a node cut off that has not yet
noticed it lost its master (its searches of the others' shards fail meanwhile: 503).
"""

from __future__ import annotations

import asyncio
import json
import logging
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


class MasterProbe:
    """The hosts the last look found without a master."""

    def __init__(
        self, product: str, every_s: float = PROBE_EVERY_S, timeout_s: float = PROBE_TIMEOUT_S
    ) -> None:
        self.path = PATHS.get(product, PATHS["elasticsearch"])
        self.every_s = every_s
        self.timeout_s = timeout_s
        self.masterless: frozenset[Any] = frozenset()

    def usable(self, connection: Any) -> bool:
        return connection not in self.masterless

    async def look(self, connections: Sequence[Any]) -> None:
        """Ask every host at once; one that does not answer keeps its last verdict (the client's
        own dead-host marking deals with hosts that do not answer)."""
        verdicts = await asyncio.gather(*(self._knows_master(c) for c in connections))
        masterless = {c for c, v in zip(connections, verdicts, strict=True) if v is False}
        unknown = {c for c, v in zip(connections, verdicts, strict=True) if v is None}
        masterless |= set(self.masterless) & unknown
        if masterless != set(self.masterless):
            log.warning(
                "searches leave out hosts without a master: %s",
                ", ".join(sorted(getattr(c, "host", str(c)) for c in masterless)) or "none now",
            )
        self.masterless = frozenset(masterless)

    async def _knows_master(self, connection: Any) -> bool | None:
        params = {"local": "true", "format": "json", "h": "id"}
        try:
            answer = await connection.perform_request("GET", self.path, params=params, timeout=self.timeout_s)
            rows = json.loads(answer[2])
        except Exception:  # noqa: BLE001 - not answering, or not readable: no verdict
            return None
        if not isinstance(rows, list) or not rows or not isinstance(rows[0], dict):
            return None
        return rows[0].get("id") not in (None, "", "-")

    async def run(self, connections: Sequence[Any]) -> None:
        """Look every ``every_s`` until cancelled (the client's own log lines of a host that does
        not answer are left out: one a second would bury the service's log)."""
        _PROBING.set(True)  # this task's context only
        while True:
            await self.look(connections)
            await asyncio.sleep(self.every_s)
