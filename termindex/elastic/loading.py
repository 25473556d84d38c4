"""Bulk loads into an Elasticsearch-protocol index: the settings a load puts on and takes off
again, the lease that lets a later opener undo a killed load's settings, and the force-merge that
ends a complete load. ``ElasticsearchIndex`` inherits it (``BulkLoading``), as it inherits the
alias's versions (``VersionedAlias``).

Why a load changes settings at all: refreshes off and rare flushes make a bulk load several
times faster; replicas off halve the work on a cluster, but only where nobody searches the index
(a version not served yet, or an index the job has just created). What a load changed is recorded
in the index itself first (``elastic.leases``), so it always comes back.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

from vsparta.termindex.elastic import leases
from vsparta.termindex.elastic.translate import errors
from vsparta.termindex.errors import EngineUnavailable, IndexNotFound, TermIndexError

__all__ = ["LOAD_REFRESH_TIMEOUT_S", "LOAD_SETTINGS", "RESTORE_TRIES", "BulkLoading"]

log = logging.getLogger(__name__)
T = TypeVar("T")

# Settings a bulk load changes, and what they are during it. Restored afterwards to what they were
# (None = the default); replicas to the serving count. The translog stays durable per request
# (an acknowledged document survives a killed node, which --resume relies on); a larger flush
# threshold means fewer Lucene commits while loading.
LOAD_SETTINGS: dict[str, Any] = {
    "index.refresh_interval": "-1",
    "index.number_of_replicas": 0,
    "index.translog.flush_threshold_size": "1gb",
}
# How often a load's end tries to restore serving settings on an unavailable engine (backoff 0.5 s
# doubling to 16 s: ~4 min in all, longer than a 3-node cluster took here to elect a new master
# after its master was cut off: up to ~80 s, docs/cluster-faults.md).
RESTORE_TRIES = 16
LOAD_REFRESH_TIMEOUT_S = 600.0  # the refresh ending a load (or a force-merge) writes segments
FAILED_LOAD_REFRESH_S = 30.0  # a failed load's end refreshes once, for at most this long


class BulkLoading:
    """``bulk_load``, ``finish_load`` and what they need; the attributes below are the index's."""

    alias: str
    engine_label: str
    _client: Any
    _target: str
    _fresh: bool
    _keep_replicas: bool | None
    _replicas: int
    _replicas_set: bool
    _lease_s: float
    _watch: leases.LeaseWatch
    _load_depth: int
    _load_job: str | None
    _loaded: int
    _merge_segments: int
    _reindex: Any
    # Also used, never stubbed here (a stub would shadow the real one in the index's MRO):
    # ``_active()`` of ``VersionedAlias``, ``_run(steps)`` and ``count()`` of the index.

    def _concrete(self) -> list[str]:
        if self._target != self.alias:
            return [self._target]
        active = self._active()
        if not active:
            raise IndexNotFound(f"alias {self.alias!r} points at no index")
        return active

    def _serving_settings(self, saved: Mapping[str, Any]) -> dict[str, Any]:
        """What a load's settings go back to: as before the load, except what a crashed load left."""
        body: dict[str, Any] = {k: saved.get(k) for k in LOAD_SETTINGS}  # None = the default
        crashed = saved.get("index.refresh_interval") in ("-1", -1)
        if crashed:  # never keep refreshes off for good
            body["index.refresh_interval"] = None
        if self._replicas_set or crashed or saved.get("index.number_of_replicas") is None:
            body["index.number_of_replicas"] = self._replicas
        return body

    def _put_settings(self, index: str, body: Mapping[str, Any]) -> None:
        with errors("update settings", engine=self.engine_label):
            self._client.indices.put_settings(index=index, body=dict(body))

    def _finish_version(self, index: str) -> None:
        """A new version's load settings back to serving ones (refresh, replicas, durable translog:
        a new version is created with an async one, since a crashed new version is loaded again)."""
        self._put_settings(index, self._serving_settings({}) | {"index.translog.durability": None})

    def _load_settings(self) -> dict[str, Any]:
        """What a load puts on. The version the alias serves keeps its replicas (a node lost
        mid-load leaves a copy of each shard to answer from); a version not served yet, or one this
        handle has just created (empty: nothing to keep answering), drops them (faster on a cluster:
        docs/elasticsearch.md). ``keep_replicas`` overrides."""
        served = self._target == self.alias and not self._fresh
        keep = self._keep_replicas if self._keep_replicas is not None else served
        return {k: v for k, v in LOAD_SETTINGS.items() if not (keep and k == "index.number_of_replicas")}

    def recover_stale_loads(self) -> list[str]:
        """Serving settings back on indices behind the alias left by a killed load (``leases``):
        one whose beat this handle has seen stand still for a lease. Each call is a look; the
        first look at a record only starts the watch."""
        return self._run(leases.recover_steps(self.alias, self._watch, self._lease_s))

    def _records(self, index: str) -> leases.Records:
        records = self._run(leases.read_steps(index)).get(index, {})
        self._watch.see(index, records)  # every look at the records times their beats
        return records

    def _write_records(self, index: str, records: leases.Records) -> None:
        self._run(leases.write_steps(index, records))

    def _renew(self, records: Mapping[str, dict[str, Any]], job: str, beat: int) -> None:
        for index, record in records.items():
            record["beat"] = beat
            self._write_records(index, self._records(index) | {job: record})

    @contextmanager
    def bulk_load(self) -> Iterator[Any]:
        """Within the block: no refreshes, rare flushes, no replicas on a version not served yet;
        restored and refreshed after, also after a failure (retried), and after a kill by the next
        opener once the load's lease has run out (``elastic.leases``)."""
        if self._load_depth:
            self._load_depth += 1
            try:
                yield self
            finally:
                self._load_depth -= 1
            return
        job, blank = leases.new_record({}, self._lease_s)
        # Each step is idempotent, so a start during a master election (a record or a setting
        # cannot be written until there is one) is tried again as a load's end is.
        records = self._retrying(lambda: self._begin_load(job, blank), "starting the load")
        heartbeat = leases.Heartbeat(lambda beat: self._renew(records, job, beat), self._lease_s).start()
        self._load_job = job
        self._load_depth = 1
        try:
            yield self
        except BaseException:
            # The load failed (e.g. a node lost): restore, retrying while the cluster recovers, but
            # never let a second failure hide the first; the lease covers what still fails.
            self._load_depth = 0
            self._load_job = None
            heartbeat.stop()
            try:
                # One short refresh at most (``_refresh_briefly``): a refresh through a cut link
                # can block for minutes a try.
                self._end_load_retrying(records, job, refresh=False)
            except TermIndexError as exc:
                log.warning(
                    "could not restore serving settings after a failed load: %s; the next opener "
                    "restores them once the load's lease (%gs) has run out",
                    exc,
                    self._lease_s,
                )
            raise
        self._load_depth = 0
        self._load_job = None
        heartbeat.stop()
        self._end_load_retrying(records, job)

    def _begin_load(self, job: str, blank: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
        """The load's record written, its documents hidden from searches, load settings on."""
        indices = self._concrete()
        with errors("read settings", engine=self.engine_label):
            current = self._client.indices.get_settings(
                index=",".join(indices), name=",".join(LOAD_SETTINGS), flat_settings=True
            )
        records: dict[str, dict[str, Any]] = {}
        served = self._target == self.alias
        hidden: dict[str, set[str]] = {}
        if served:
            self._ensure_current_mapping()  # the field the alias filter names
            hidden = self._run(leases.hidden_steps(self.alias))
        for n in indices:
            # Another load of this index (running, or killed), or this one's try before, saw the
            # serving settings: keep those.
            earlier = [r["serving"] for r in self._records(n).values() if r.get("serving")]
            saved = current.get(n, {}).get("settings", {})
            serving = dict(earlier[0]) if earlier else self._serving_settings(saved)
            if self._replicas_set:
                serving["index.number_of_replicas"] = self._replicas
            records[n] = dict(blank) | {"serving": serving}
            mine = self._records(n) | {job: records[n]}
            self._write_records(n, mine)  # before anything changes
            if served:  # searches leave this load's documents out until it ends, and keep out
                # those of a failed load not shown yet (no record: its end could not refresh)
                self._run(leases.hide_steps(self.alias, n, set(mine) | hidden.get(n, set())))
            self._put_settings(n, self._load_settings())
        return records

    def _end_load_retrying(
        self, records: Mapping[str, dict[str, Any]], job: str, refresh: bool = True
    ) -> None:
        """``_end_load``, tried again on an unavailable engine (``_retrying``)."""
        self._retrying(lambda: self._end_load(records, job, refresh), "restoring serving settings")

    @staticmethod
    def _retrying(step: Callable[[], T], what: str) -> T:
        """``step``, tried again on an unavailable engine for up to ~4 min (a lost node's shards
        reassigned, a master elected; a node cut off answers only with a timeout); each try may
        reach any node of the host list."""
        for attempt in range(RESTORE_TRIES):
            try:
                return step()
            except EngineUnavailable as exc:
                if attempt + 1 == RESTORE_TRIES:
                    raise
                pause = min(16.0, 0.5 * 2**attempt)
                log.info("%s: %s; trying again in %gs", what, exc, pause)
                time.sleep(pause)
        raise AssertionError("unreachable")

    def _living_others(self, index: str, job: str) -> leases.Records:
        """The other loads of ``index`` still beating. One not watched for a lease yet is watched
        until it is known (at most its lease: a load's end may wait that long, only then)."""
        while True:
            others = {k: r for k, r in self._records(index).items() if k != job}
            verdicts = {k: self._watch.verdict(index, k, r) for k, r in others.items()}
            if None not in verdicts.values():
                return {k: r for k, r in others.items() if verdicts[k] is False}
            wait = max(self._watch.wait_s(index, k, others[k]) for k, v in verdicts.items() if v is None)
            log.info("%s: watching another load's beat for up to %.0fs before restoring", index, wait)
            time.sleep(min(wait + 0.1, max(1.0, self._lease_s / 6)))

    def _end_load(self, records: Mapping[str, dict[str, Any]], job: str, refresh: bool = True) -> None:
        """Serving settings back, then this load's record removed; while another load of the same
        index still runs (its beat moves), its end restores them instead. Every shard refreshed
        (``refresh`` false, a failed load's end: for a short while, ``_refresh_briefly``), then the
        load's documents shown in one alias update (``leases.hide_steps``); a failed load whose
        refresh did not reach every shard leaves its documents hidden, for the next load's end or
        an observer a lease later (``leases.recover_steps``) to refresh and show."""
        still: dict[str, leases.Records] = {}
        for n, record in records.items():
            others = self._living_others(n, job)
            still[n] = others
            if others:
                self._write_records(n, others)
                log.info("%s: serving settings left to the load still running (%s)", n, ", ".join(others))
                continue
            self._put_settings(n, record["serving"])
            self._write_records(n, {})
        # The first refresh after a load writes everything buffered since it began into segments:
        # 1M documents took over 10 s (the default timeout) on OpenSearch 3.x on a busy machine.
        if refresh:
            self.refresh(timeout_s=LOAD_REFRESH_TIMEOUT_S)
        shown = refresh or self._refresh_briefly()
        if self._target == self.alias:
            for n, others in still.items():
                self._run(leases.hide_steps(self.alias, n, set(others) | (set() if shown else {job})))

    def _refresh_briefly(self) -> bool:
        """A failed load's end: one refresh of at most ``FAILED_LOAD_REFRESH_S``; whether it reached
        every shard. The engine refreshes by itself when the interval changes, but in the background
        on each node: an alias update showing the documents could come first, and a search in
        between saw a mix of two states (the soak caught it on OpenSearch 2.19)."""
        try:
            self.refresh(timeout_s=FAILED_LOAD_REFRESH_S)
            return True
        except TermIndexError as exc:
            log.warning("a failed load's documents stay hidden until a refresh reaches every shard: %s", exc)
            return False

    def finish_load(self) -> str:
        """After a complete load: force-merge to ``merge_segments`` per shard when this handle
        wrote at least half of the index, then (``new_version``) swap the alias to the new
        version. Returns a line for the job summary."""
        notes = []
        total = self._retrying(self.count, "counting the loaded index")
        if self._merge_segments and 2 * self._loaded >= total:
            notes.append(self.force_merge(self._merge_segments))
        elif self._merge_segments:  # a small top-up: merging the whole index would cost more than it saves
            notes.append(f"no force-merge ({self._loaded} of {total} documents written by this load)")
        if self._reindex is not None:
            version = self._reindex.commit()
            self._reindex = None
            self._target = self.alias
            notes.append(f"alias {self.alias} -> {version}")
        return "; ".join(notes) or "nothing to finish"

    def segments(self) -> int:
        """Live segments over the primaries of the write target."""
        with errors("segment stats", engine=self.engine_label):
            stats = self._client.indices.stats(index=self._target, metric="segments")
        return int(stats["_all"]["primaries"]["segments"]["count"])

    def force_merge(self, max_segments: int = 1) -> str:
        """Merge each shard down to ``max_segments`` (fewer, larger segments: smaller on disk and
        faster to search; worth it once a load is complete, not while documents still arrive)."""
        before = self.segments()
        t0 = time.perf_counter()
        with errors("force merge", engine=self.engine_label):
            self._client.indices.forcemerge(
                index=self._target, max_num_segments=max_segments, request_timeout=24 * 3600
            )
        self.refresh(timeout_s=LOAD_REFRESH_TIMEOUT_S)
        after = self.segments()
        line = f"force-merged {before} -> {after} segments in {time.perf_counter() - t0:.1f}s"
        log.info("%s (%s)", line, self._target)
        return line

    def refresh(self, timeout_s: float | None = None) -> None:
        """Make what was written searchable; ``timeout_s`` past the client's request timeout. Some
        shards not refreshed (``leases.refresh_steps``) is ``EngineUnavailable``: a load's end
        tries again."""
        problem = self._run(leases.refresh_steps(self._target, timeout_s))
        if problem:
            raise EngineUnavailable(f"{self.engine_label}: {problem}")
