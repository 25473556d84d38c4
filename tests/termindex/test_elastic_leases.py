"""Serving settings come back after a failed or killed load (``termindex/elastic/leases.py``).

A real ``vsparta index`` process is SIGKILLed mid-load against a real node: while its beat moves
nobody touches the index (an opener watching it for longer than the lease leaves it alone), and
once an observer has seen the beat stand still for a lease (a handle looking again, the service
on its readiness checks) it puts the serving settings back in one log line. One clock decides,
the observer's: a load whose machine's clock is hours off (``faketime``) is judged the same way.
A load that fails restores them itself, retrying through a cluster that answers 503 for a while,
over a host list whose first node is down.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from elastic_testkit import FaultProxy, free_port, random_docs, served_index, tokenizer_folder, unique_name

from vsparta.termindex.base import TermDocument
from vsparta.termindex.elastic.index import ElasticsearchIndex
from vsparta.termindex.elastic.leases import META_KEY

pytestmark = pytest.mark.elasticsearch

WORDS = [f"w{i}" for i in range(300)]
LEASE_S = 3.0
LOAD_KEYS = ("index.refresh_interval", "index.translog.flush_threshold_size")


def _export(path: Path, n: int) -> Path:
    """``n`` term documents of 150 words each: a load that lasts well past a few leases."""
    rng = np.random.default_rng(7)
    with path.open("w") as f:
        for i in range(n):
            words = rng.choice(len(WORDS), size=150, replace=False)
            terms = {
                WORDS[w]: round(float(x), 4) for w, x in zip(words, rng.uniform(0.1, 3, 150), strict=True)
            }
            f.write(json.dumps({"id": f"doc-{i:06d}", "terms": terms}) + "\n")
    return path


def _state(index: ElasticsearchIndex) -> tuple[dict[str, Any], dict[str, Any]]:
    """(load-related settings, load records) of the one version behind the alias."""
    (name,) = index._concrete()
    flat = index._client.indices.get_settings(index=name, flat_settings=True)[name]["settings"]
    meta = index._client.indices.get_mapping(index=name)[name]["mappings"].get("_meta") or {}
    return {k: flat.get(k) for k in (*LOAD_KEYS, "index.number_of_replicas")}, meta.get(META_KEY) or {}


@pytest.fixture
def served(es_url: str) -> Iterator[ElasticsearchIndex]:
    """A served index with documents in it, deleted afterwards."""
    with served_index(es_url, "lease") as index:
        yield index


def _killed_load(
    es_url: str, index: ElasticsearchIndex, tmp_path: Path, clock: tuple[str, ...] = ()
) -> dict[str, Any]:
    """Start ``vsparta index`` into ``index`` (under ``clock``, e.g. faketime), check that an
    opener watching it for longer than a lease leaves the running load alone (its beat moves),
    then SIGKILL it; returns its record."""
    export = _export(tmp_path / "docs.jsonl", 40_000)
    tokenizer = tokenizer_folder(tmp_path, WORDS)
    argv = [*clock, sys.executable, "-m", "vsparta.cli", "index", str(export), "--tokenizer", str(tokenizer),
            "--backend", f"{es_url}/{index.alias}", "--workers", "0", "--no-progress"]  # fmt: skip
    env = os.environ | {"VSPARTA_LOAD_LEASE_S": str(LEASE_S), "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
    job = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 120
        while not _state(index)[1]:  # the load's record is written before anything changes
            assert job.poll() is None, f"the job ended before loading: {job.communicate()[0][-2000:]}"
            assert time.monotonic() < deadline, "the load never started"
            time.sleep(0.1)
        with ElasticsearchIndex(es_url, index.alias) as watcher:  # its first look starts the watch
            time.sleep(2 * LEASE_S)  # longer than the lease: only the moving beat keeps it alive
            assert watcher.recover_stale_loads() == []
            settings, records = _state(watcher)
        assert job.poll() is None, "the load ended before it was killed: nothing was tested"
        assert settings["index.refresh_interval"] == "-1" and len(records) == 1, (settings, records)
        (record,) = records.values()
        assert record["pid"] == job.pid or clock  # (faketime runs the job in a child)
        assert record["lease_s"] == LEASE_S and record["beat"] >= 2
    finally:
        os.killpg(job.pid, signal.SIGKILL)  # the job and, under faketime, its child
        job.communicate()
    time.sleep(LEASE_S + 0.5)
    with ElasticsearchIndex(es_url, index.alias) as opener:  # killed a lease ago, but seen only now
        settings, records = _state(opener)
        assert opener.recover_stale_loads() == []
    assert settings["index.refresh_interval"] == "-1" and records, "restored on a first look"
    return record


def _restored_after_watching(es_url: str, alias: str) -> tuple[dict[str, Any], dict[str, Any], int]:
    """An opener that looks, waits a lease and looks again: (settings, records, count) after."""
    with ElasticsearchIndex(es_url, alias) as opener:
        time.sleep(LEASE_S + 0.5)
        assert opener.recover_stale_loads() != []
        after, records = _state(opener)
        return after, records, opener.count()


@pytest.mark.slow
def test_a_killed_load_is_restored_once_its_beat_stood_still_for_a_lease(
    es_url: str, served: ElasticsearchIndex, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    before, _ = _state(served)
    _killed_load(es_url, served, tmp_path)
    caplog.set_level(logging.WARNING, logger="vsparta.termindex.elastic.leases")
    after, records, count = _restored_after_watching(es_url, served.alias)
    assert count > 50  # refreshed and shown: what the killed job wrote is searchable
    assert after == before and records == {}
    lines = [r.getMessage() for r in caplog.records if "restored serving settings" in r.getMessage()]
    assert len(lines) == 1 and "refresh_interval default" in lines[0] and "that stopped" in lines[0], lines
    assert "its beat at" in lines[0]


@pytest.mark.slow
def test_a_load_whose_clock_is_hours_off_is_judged_by_its_beat_alone(
    es_url: str, served: ElasticsearchIndex, tmp_path: Path, require: Any
) -> None:
    """The loader's wall clock two hours behind (libfaketime): compared with the opener's clock it
    would have looked dead at once, mid-load. Its beat moves, so it is left alone; killed, it is
    restored a lease after its beat stopped, as any other."""
    require(shutil.which("faketime") is not None, "faketime", "run `bash scripts/install-system-deps.sh`")
    before, _ = _state(served)
    record = _killed_load(es_url, served, tmp_path, clock=("faketime", "-f", "-2h"))
    assert record["started"] < time.time() - 3600  # the loader's clock really was hours off
    after, records, count = _restored_after_watching(es_url, served.alias)
    assert after == before and records == {} and count >= 50


@pytest.mark.slow
def test_a_killed_load_is_restored_by_the_service_a_lease_after_it_started(
    es_url: str, served: ElasticsearchIndex, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from fastapi.testclient import TestClient

    from vsparta.service.app import create_app
    from vsparta.service.settings import ServiceSettings

    before, _ = _state(served)
    _killed_load(es_url, served, tmp_path)
    settings = ServiceSettings(backend=f"{es_url}/{served.alias}", model_path=tmp_path / "model")
    caplog.set_level(logging.WARNING, logger="vsparta.termindex.elastic.leases")
    with TestClient(create_app(settings)) as client:  # its start looks once
        assert client.get("/ready").status_code == 200
        assert _state(served)[1], "restored on the service's first look"
        time.sleep(LEASE_S + 0.5)
        assert client.get("/ready").status_code == 200  # a readiness check a lease later restores
    after, records = _state(served)
    assert after == before and records == {}
    assert sum("restored serving settings" in r.getMessage() for r in caplog.records) == 1


def test_a_failed_load_restores_through_a_503_and_a_dead_first_node(
    es_url: str, served: ElasticsearchIndex
) -> None:
    """The first host of the list refuses connections; the second (a proxy of the real node)
    answers 503 to the first settings updates, as a cluster electing a master does."""
    before, _ = _state(served)
    with FaultProxy(es_url, mode="503", failures=0, path="_settings") as proxy:
        hosts = f"http://127.0.0.1:{free_port()},127.0.0.1:{proxy.port}"
        with ElasticsearchIndex(hosts, served.alias) as index:
            with pytest.raises(RuntimeError, match="the load failed"), index.bulk_load():
                fresh = [TermDocument(f"new-{d.id}", d.weights) for d in random_docs(20, 300, seed=2)]
                index.upsert(fresh, refresh=False)
                assert _state(index)[0]["index.refresh_interval"] == "-1"
                proxy.failures = 3  # the next three settings updates answer 503
                raise RuntimeError("the load failed")
        assert proxy.bulk_failed == 3  # the restore was refused three times and tried again
    after, records = _state(served)
    assert after == before and records == {}
    assert served.count() == 70  # refreshed


def test_a_load_into_the_served_version_keeps_its_replicas_a_new_version_drops_them(es_url: str) -> None:
    """One node: replicas 1 cannot be allocated, but the setting shows what a load does to it. The
    handle that creates the index loads it empty, with nobody to keep answering: it drops them."""
    alias = unique_name("replicas")
    with ElasticsearchIndex(es_url, alias, create=True, replicas=1) as creating, creating.bulk_load():
        first, _ = _state(creating)
    assert first["index.number_of_replicas"] == "0" and first["index.refresh_interval"] == "-1"
    index = ElasticsearchIndex(es_url, alias, create=True)
    try:
        assert _state(index)[0]["index.number_of_replicas"] == "1"  # restored after the first load
        with index.bulk_load():
            during, _ = _state(index)
        assert during["index.number_of_replicas"] == "1" and during["index.refresh_interval"] == "-1"
        reindex = index.begin_reindex()
        with reindex.index.bulk_load():
            name = reindex.version
            flat = index._client.indices.get_settings(index=name, flat_settings=True)[name]["settings"]
            assert flat["index.number_of_replicas"] == "0"
        reindex.abort()
        with ElasticsearchIndex(es_url, alias, keep_replicas=False) as dropping, dropping.bulk_load():
            assert _state(dropping)[0]["index.number_of_replicas"] == "0"
        assert _state(index)[0]["index.number_of_replicas"] == "1"
    finally:
        index.drop()
        index.close()
