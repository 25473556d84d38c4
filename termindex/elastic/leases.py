"""Load leases: a bulk load's record, in the index's own mapping ``_meta``, of the serving settings
it changed and that it is still running, so an index left in load settings heals itself.

A load (``ElasticsearchIndex.bulk_load``) writes a record under ``_meta.vsparta_loads.<job>``
before it turns refresh off: the settings to put back, who loads (host, pid) and a heartbeat it
renews every ``lease_s / 6`` seconds from a thread. A load that ends (completed or failed) puts
the settings back and removes its record. A load killed with SIGKILL (or a machine lost) leaves
the record, whose heartbeat stops: once it is older than its ``lease_s`` any opener (a later
``ElasticsearchIndex``, the service at start and on its readiness checks) puts the recorded
settings back and removes the record, in one log line. A fresh record means a load still running:
it is left alone.

Why ``_meta``: it lives and dies with the index (no second index to keep in step, nothing left
behind when a version is deleted), every node answers it from the cluster state, and changing it
is allowed on any index. ``_meta`` is replaced as a whole by each write, so records are read,
changed and written back; concurrent loads of one index (``--num-shards``) may overwrite each
other's record for a moment, which the next heartbeat puts back. Staleness compares the writer's
clock (the heartbeat) with the opener's: machines more than ``lease_s`` apart would misjudge.

``VSPARTA_LOAD_LEASE_S`` sets the lease of loads started in that environment (default 60 s).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from vsparta.termindex.elastic.reads import Call, Steps

log = logging.getLogger(__name__)

META_KEY = "vsparta_loads"
DEFAULT_LEASE_S = 60.0
LEASE_ENV = "VSPARTA_LOAD_LEASE_S"

Records = dict[str, dict[str, Any]]  # job id -> record


def lease_seconds(value: Any = None) -> float:
    """The lease of a new load: the engine option, else ``VSPARTA_LOAD_LEASE_S``, else 60 s."""
    raw = value if value is not None else os.environ.get(LEASE_ENV, DEFAULT_LEASE_S)
    try:
        lease = float(raw)
    except (TypeError, ValueError):
        raise ValueError(f"load lease must be a number of seconds, got {raw!r}") from None
    if not lease > 0:
        raise ValueError(f"load lease must be > 0 seconds, got {raw!r}")
    return lease


def new_record(serving: Mapping[str, Any], lease_s: float) -> tuple[str, dict[str, Any]]:
    """(job id, record) of a load about to change ``serving``'s settings."""
    job = uuid.uuid4().hex[:12]
    record = {
        "serving": dict(serving),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "started": round(time.time(), 3),
        "heartbeat": round(time.time(), 3),
        "lease_s": lease_s,
    }
    return job, record


def is_stale(record: Mapping[str, Any], now: float | None = None) -> bool:
    now = time.time() if now is None else now
    try:
        return now - float(record["heartbeat"]) > float(record["lease_s"])
    except (KeyError, TypeError, ValueError):
        return True  # a record this code cannot read holds nothing up


def describe(job: str, record: Mapping[str, Any], now: float | None = None) -> str:
    now = time.time() if now is None else now
    age = now - float(record.get("heartbeat") or now)
    return f"load {job} (host {record.get('host')}, pid {record.get('pid')}, last heartbeat {age:.0f}s ago)"


def settings_text(serving: Mapping[str, Any]) -> str:
    shown = {k.removeprefix("index."): "default" if v is None else v for k, v in serving.items()}
    return ", ".join(f"{k} {v}" for k, v in shown.items())


def read_steps(index: str) -> Steps[dict[str, Records]]:
    """Records per concrete index (``index`` may be an alias: one request covers its indices)."""
    answer = yield Call("read load records", "indices.get_mapping", {"index": index})
    out: dict[str, Records] = {}
    for name, body in answer.items():
        meta = (body.get("mappings") or {}).get("_meta") or {}
        records = meta.get(META_KEY) or {}
        out[name] = {k: dict(v) for k, v in records.items() if isinstance(v, Mapping)}
    return out


def write_steps(index: str, records: Records) -> Steps[None]:
    body = {"_meta": {META_KEY: records}}
    yield Call("write load record", "indices.put_mapping", {"index": index, "body": body})


def settings_steps(index: str, serving: Mapping[str, Any]) -> Steps[None]:
    yield Call("update settings", "indices.put_settings", {"index": index, "body": dict(serving)})


def recover_steps(alias: str) -> Steps[list[str]]:
    """Put back the serving settings of every index behind ``alias`` whose load records are all
    stale (their loads were killed); returns the indices restored. A fresh record: left alone."""
    restored = []
    for index, records in (yield from read_steps(alias)).items():
        now = time.time()
        if not records or not all(is_stale(r, now) for r in records.values()):
            continue
        job, record = min(records.items(), key=lambda kv: float(kv[1].get("started") or 0))
        serving = record.get("serving") or {}
        yield from settings_steps(index, serving)
        yield from write_steps(index, {})
        yield Call("refresh", "indices.refresh", {"index": index})
        log.warning(
            "restored serving settings of %s (%s) left by %s that stopped without ending",
            index,
            settings_text(serving),
            describe(job, record, now),
        )
        restored.append(index)
    return restored


class Heartbeat:
    """Renews a load's records from a thread until ``stop``; a failed renewal is tried again at
    the next beat (the lease is six beats long)."""

    def __init__(self, renew: Callable[[float], None], lease_s: float) -> None:
        self._renew = renew
        self._every = max(0.2, lease_s / 6)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="vsparta-load-lease", daemon=True)

    def start(self) -> Heartbeat:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            try:
                self._renew(round(time.time(), 3))
            except Exception as exc:  # the engine may be busy or a node lost: next beat
                log.debug("load lease not renewed: %s", exc)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
