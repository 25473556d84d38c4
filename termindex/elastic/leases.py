"""Load leases: a bulk load's record, in the index's own mapping ``_meta``, of the serving settings
it changed and that it is still running, so an index left in load settings heals itself.

A load (``ElasticsearchIndex.bulk_load``) writes a record under ``_meta.vsparta_loads.<job>``
before it turns refresh off: the settings to put back, who loads (host, pid) and a beat, a counter
it raises every ``lease_s / 6`` seconds from a thread. A load that ends (completed or failed) puts
the settings back and removes its record. A load killed with SIGKILL (or a machine lost) leaves
the record, whose beat stops: an observer that has watched the beat stand still for longer than
the record's ``lease_s`` (a ``LeaseWatch``: the service on its readiness checks, a later load while
it runs and at its end, any handle's ``recover_stale_loads`` called again after a lease) puts the
recorded settings back and removes the record, in one log line. A beat seen moving means a load
still running: it is left alone.

What a running load writes stays out of searches until it ends, even where the cluster refreshes
a shard copy on its own: a copy recovered after a node came back (or a replica promoted, or a
node restarted) opens a new searcher with everything written so far, so with refresh off alone
searches answered from the old state on some copies and from part of the load on others (the
soak saw it: ``bench/soak.py``). Each document a load writes carries its job id (``load``), and
while the load runs the alias filters them out (``hide_steps``); its end refreshes every shard and
then, in one alias update, shows them: a search sees the index as the load found it, or as it
left it, never a mix.

What no record explains heals the same way: a request of a load held by a slow or cut link can
reach the engine after the load has ended (refreshes turned off again, or its documents hidden
again), and a failed load whose refresh could not reach every shard leaves its documents hidden on
purpose. An observer that has seen such state stand unchanged for a lease turns refreshes back on,
refreshes every shard and shows the documents (``recover_steps``); a later load keeps them hidden
while it runs and shows them at its end.

One clock decides: the observer's own monotonic clock, timing how long it has seen a beat stand
still. No wall-clock time written by one machine is compared with another machine's (loader and
opener clocks hours apart once restored a running load's settings at once, or kept a dead load's
for hours). The price: a process that has watched a record for less than a lease cannot tell yet
(an opener that looks once restores nothing; the next observation after a lease does).

Why ``_meta``: it lives and dies with the index (no second index to keep in step, nothing left
behind when a version is deleted), every node answers it from the cluster state, and changing it
is allowed on any index. ``_meta`` is replaced as a whole by each write, so records are read,
changed and written back; concurrent loads of one index (``--num-shards``) may overwrite each
other's record for a moment, which the next beat puts back.

``VSPARTA_LOAD_LEASE_S`` sets the lease of loads started in that environment (default 60 s).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from vsparta.termindex.elastic.common import LOAD_FIELD
from vsparta.termindex.elastic.reads import Call, Steps

log = logging.getLogger(__name__)

META_KEY = "vsparta_loads"
DEFAULT_LEASE_S = 60.0
LEASE_ENV = "VSPARTA_LOAD_LEASE_S"

Records = dict[str, dict[str, Any]]  # job id -> record
LEFTOVER = "~leftover"  # the watch's key for load state no record explains (``recover_steps``)
# The settings a load turns off that no serving index keeps (restored to their defaults when left
# behind with no record; replicas are kept by a load of the served version).
LOAD_KEYS = ("index.refresh_interval", "index.translog.flush_threshold_size")


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
    """(job id, record) of a load about to change ``serving``'s settings. ``started`` is the loader's
    wall clock, for people reading the record; no decision reads it."""
    job = uuid.uuid4().hex[:12]
    record = {
        "serving": dict(serving),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "started": round(time.time(), 3),
        "beat": 0,
        "lease_s": lease_s,
    }
    return job, record


def _marker(record: Mapping[str, Any]) -> Any:
    """What moves while a load lives: its beat (a record of older code: its heartbeat time)."""
    return record.get("beat", record.get("heartbeat"))


def _lease(record: Mapping[str, Any]) -> float | None:
    try:
        lease = float(record["lease_s"])
    except (KeyError, TypeError, ValueError):
        return None
    return lease if lease > 0 else None


@dataclass
class _Sight:
    marker: Any
    since: float  # when this process first saw the marker at this value (its monotonic clock)
    moved: bool  # seen at another value before: the load was alive then
    lease: float


class LeaseWatch:
    """What this process has seen of each load's beat, timed on its own monotonic clock: a load
    is dead once its beat has stood still here for longer than its lease."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._seen: dict[tuple[str, str], _Sight] = {}
        self._lock = threading.Lock()  # the heartbeat thread and the handle's own calls both look

    def see(self, index: str, records: Records) -> None:
        """Note each record's beat now; records gone from the index are forgotten."""
        now = self._clock()
        with self._lock:
            for key in [k for k in self._seen if k[0] == index and k[1] not in records]:
                del self._seen[key]
            for job, record in records.items():
                sight = self._seen.get((index, job))
                marker, lease = _marker(record), _lease(record) or 0.0
                if sight is None or sight.marker != marker:
                    self._seen[(index, job)] = _Sight(marker, now, sight is not None, lease)

    def standing(self, index: str, job: str) -> float:
        """Seconds this process has seen the job's beat stand still (0 if never seen)."""
        with self._lock:
            sight = self._seen.get((index, job))
            return 0.0 if sight is None else self._clock() - sight.since

    def verdict(self, index: str, job: str, record: Mapping[str, Any]) -> bool | None:
        """True: dead (its beat stood still here for longer than its lease, or a record nobody can
        read); False: alive (its beat moved within its lease); None: not known yet."""
        lease = _lease(record)
        if lease is None:
            return True  # a record this code cannot read holds nothing up
        with self._lock:
            sight = self._seen.get((index, job))
        if sight is None:
            return None
        if self._clock() - sight.since > lease:
            return True
        return False if sight.moved else None

    def wait_s(self, index: str, job: str, record: Mapping[str, Any]) -> float:
        """How long until ``verdict`` can say dead, if the beat keeps standing still."""
        return max(0.0, (_lease(record) or 0.0) - self.standing(index, job))

    def due(self) -> bool:
        """Some record's beat has stood still here for its lease: a look now can judge it dead."""
        now = self._clock()
        with self._lock:
            return any(now - s.since > s.lease for s in self._seen.values())


def describe(job: str, record: Mapping[str, Any], standing_s: float) -> str:
    return (
        f"load {job} (host {record.get('host')}, pid {record.get('pid')}, its beat at "
        f"{_marker(record)} for {standing_s:.0f}s)"
    )


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


def hide_steps(alias: str, index: str, jobs: Iterable[str]) -> Steps[None]:
    """The alias over ``index`` with a filter leaving out the documents of ``jobs`` (running
    loads), or with none; one alias update, which replaces the alias's previous filter."""
    hidden = sorted(set(jobs))
    add: dict[str, Any] = {"index": index, "alias": alias}
    if hidden:
        add["filter"] = {"bool": {"must_not": [{"terms": {LOAD_FIELD: hidden}}]}}
    body = {"actions": [{"add": add}]}
    yield Call(
        "hide running loads" if hidden else "show loaded documents", "indices.update_aliases", {"body": body}
    )


def hidden_steps(alias: str) -> Steps[dict[str, set[str]]]:
    """The jobs whose documents the alias's filter leaves out, per index behind it (none where
    ``alias`` names a concrete index)."""
    answer = yield Call("read alias", "indices.get_alias", {"name": alias, "ignore": [404]})
    out: dict[str, set[str]] = {}
    if "status" in answer and "error" in answer:  # no such alias
        return out
    for index, body in answer.items():
        found = ((body.get("aliases") or {}).get(alias) or {}).get("filter") or {}
        jobs: set[str] = set()
        for clause in (found.get("bool") or {}).get("must_not") or []:
            jobs.update((clause.get("terms") or {}).get(LOAD_FIELD) or [])
        out[index] = jobs
    return out


def refresh_off_steps(alias: str) -> Steps[dict[str, bool]]:
    """Per index behind the alias: are refreshes off (a load's setting)?"""
    kwargs = {"index": alias, "name": "index.refresh_interval", "flat_settings": True}
    answer = yield Call("read settings", "indices.get_settings", kwargs)
    flat = {i: (b.get("settings") or {}).get("index.refresh_interval") for i, b in answer.items()}
    return {i: value in ("-1", -1) for i, value in flat.items()}


def refresh_steps(index: str, request_timeout: float | None = None) -> Steps[str]:
    """Refresh ``index``; "" when every shard copy that answers did, else what did not (a master
    being elected, a node cut off: the engine answers 500 with the shards that failed). The one
    rule of "refreshed" for a load's end and for an observer restoring one: never show documents
    that some shard cannot yet search."""
    kwargs: dict[str, Any] = {"index": index, "ignore": [500]}
    if request_timeout is not None:
        kwargs["request_timeout"] = request_timeout
    answer = yield Call("refresh", "indices.refresh", kwargs)
    shards = answer.get("_shards") if isinstance(answer, Mapping) else None
    if not isinstance(shards, Mapping):  # a 500 that is not about shards
        return f"error 500 (refresh): {answer}"
    if not int(shards.get("failed") or 0):  # (unassigned replicas count as neither failed nor done)
        return ""
    reasons = sorted({str((f.get("reason") or {}).get("type")) for f in shards.get("failures") or []})
    return f"{shards['failed']} of {shards.get('total')} shard copies not refreshed: {', '.join(reasons)}"


def _leftover(jobs: set[str], refresh_off: bool, lease_s: float) -> Records:
    """A pseudo-record for load state that no record explains, watched like a record: its
    "beat" is the state itself, so a change restarts the watch."""
    if not jobs and not refresh_off:
        return {}
    return {LEFTOVER: {"beat": f"{sorted(jobs)} refresh off {refresh_off}", "lease_s": lease_s}}


def recover_steps(alias: str, watch: LeaseWatch, lease_s: float | None = None) -> Steps[list[str]]:
    """Put back the serving settings of every index behind ``alias`` whose loads ``watch`` has
    seen dead (their beats stood still for a lease), refresh it and show what they wrote; returns
    the indices restored. A load seen beating, or not watched long enough yet, is left alone.

    Also load state no record explains, once it has stood for a lease (``lease_s``, default
    ``lease_seconds()``): refreshes off, or documents hidden, with no load recorded. A request
    held by a slow or cut link can reach the engine after its load has ended (the soak saw a
    load's "refreshes off" land after its end had put them back); a load's own end, which removes
    its record before its refresh and shows afterwards, is over long before a lease."""
    lease = lease_seconds(lease_s)
    # Read before the records: a load writes its record before it hides anything or turns
    # refreshes off, so what these show with no record read after them was left by no running load.
    hidden = yield from hidden_steps(alias)
    refresh_off = yield from refresh_off_steps(alias)
    restored = []
    for index, records in (yield from read_steps(alias)).items():
        if records:
            judged = records
        else:
            judged = _leftover(hidden.get(index, set()), refresh_off.get(index, False), lease)
        watch.see(index, judged)
        if not judged or not all(watch.verdict(index, j, r) for j, r in judged.items()):
            continue
        if records:
            job, record = min(records.items(), key=lambda kv: float(kv[1].get("started") or 0))
            serving = record.get("serving") or {}
            left_by = f"{describe(job, record, watch.standing(index, job))} that stopped without ending"
        else:
            serving = {k: None for k in LOAD_KEYS} if refresh_off.get(index) else {}
            state, standing = judged[LEFTOVER]["beat"], watch.standing(index, LEFTOVER)
            left_by = f"no load on record (hidden jobs {state} for {standing:.0f}s)"
        if serving:
            yield from settings_steps(index, serving)
        if records:
            yield from write_steps(index, {})
        whole = not (yield from refresh_steps(index))
        if whole:  # shown once every shard has refreshed: never a mix of two states
            yield from hide_steps(alias, index, [])
        log.warning(
            "restored serving settings of %s (%s) left by %s%s",
            index,
            settings_text(serving) or "unchanged",
            left_by,
            "" if whole else "; its documents stay hidden until a refresh reaches every shard",
        )
        restored.append(index)
    return restored


class Heartbeat:
    """Raises a load's beat from a thread until ``stop`` (``renew(beat)`` writes it); a failed
    renewal is tried again at the next beat (the lease is six beats long)."""

    def __init__(self, renew: Callable[[int], None], lease_s: float) -> None:
        self._renew = renew
        self._beat = 0
        self._every = max(0.2, lease_s / 6)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="vsparta-load-lease", daemon=True)

    def start(self) -> Heartbeat:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            self._beat += 1  # a failed write skips a number: only movement matters
            try:
                self._renew(self._beat)
            except Exception as exc:  # the engine may be busy or a node lost: next beat
                log.debug("load lease not renewed: %s", exc)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
