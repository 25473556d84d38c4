"""Partitions, one-way links and slow links on a real 3-node cluster, during a ``vsparta index``
load into the served index and two query streams through ``vsparta serve`` (both real processes,
given every node in one multi-host spec), and a short soak of random faults.

Each node binds its own loopback address and iptables rules of this session's own chains cut node
pairs apart by address (``bench/fault_net.py``); a slow link holds the pair's packets for seconds
in user space (this kernel has no netem). For every fault: the majority elects a new master when
the master is cut off; every document the load reported indexed is in the index, once, with the
oracle's weights; every search answers 503 or exactly the oracle's top-k over the index as the
load found it (or as a finished run of it left it), never 500, never a mix, never the older
version kept behind the alias; after healing the cluster is green and the index is the oracle's.

Which fault runs on which engine line in CI is ``IN_CI`` (CI time); the others are marked
``long_fault`` and run with ``VSPARTA_FAULT_SCENARIOS=all``; the soak (``vsparta bench soak``) draws
from all of them.
"""

from __future__ import annotations

import json
import logging
import os
import random
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from elastic_testkit import FaultCluster, open_on, unique_name

from vsparta.bench.fault_checks import check_documents
from vsparta.bench.fault_events import KINDS, PARTITIONS, Event, run_event
from vsparta.bench.fault_load import LoadJob, term_documents, tokenizer_folder, write_jsonl
from vsparta.bench.fault_run import FaultRun, present_ids
from vsparta.bench.soak import run_soak
from vsparta.termindex import open_index
from vsparta.termindex.base import TermDocument
from vsparta.termindex.errors import DocumentsNotWritten

pytestmark = [pytest.mark.elasticsearch, pytest.mark.slow]
log = logging.getLogger(__name__)

# What CI runs (each costs 3-6 minutes of two shared cores, and CI gets ~8 minutes for all of it):
# on Elasticsearch 7.17 the master cut off during a load, on OpenSearch 2.19 a short soak of
# random faults. The rest is marked ``long_fault``: deselected unless VSPARTA_FAULT_SCENARIOS=all
# (tests/conftest.py); `vsparta bench soak` draws from every kind on both lines.
LINES = ("elasticsearch-7.17", "opensearch-2.19")
IN_CI = {("elasticsearch-7.17", "master-cut"), ("opensearch-2.19", "soak")}


def scenarios(kinds: tuple[str, ...]) -> list[Any]:
    """(line, kind) params; those CI has no time for marked ``long_fault``."""
    marks = [pytest.mark.long_fault]
    return [
        pytest.param(line, kind, marks=[] if (line, kind) in IN_CI else marks, id=f"{line}-{kind}")
        for line in LINES
        for kind in kinds
    ]


SOAK_MINUTES = float(os.environ.get("VSPARTA_TEST_SOAK_MINUTES", "1"))


@pytest.fixture
def whole(fault_cluster: FaultCluster) -> FaultCluster:
    """The cluster healed and whole (a test before may have failed mid-fault), green."""
    fault_cluster.healthy()
    return fault_cluster


def _load_until(run: FaultRun, docs: int, share: float) -> Any:
    """An ``on_start`` for ``FaultRun.load``: returns once ``share`` of the load's documents are in."""

    def wait(job: LoadJob) -> None:
        sample = [f"load-{i:06d}" for i in range(0, docs, max(1, docs // 40))]
        deadline = time.monotonic() + 180
        with run.index() as index:
            while len(present_ids(index, sample)) < share * len(sample):
                assert job.running() and time.monotonic() < deadline, (
                    f"the load never got going: {job.output}"
                )
                time.sleep(0.3)

    return wait


@pytest.mark.parametrize(
    ("fault_cluster", "kind"), scenarios((*PARTITIONS, "slow-link")), indirect=["fault_cluster"]
)
def test_a_fault_during_a_load_and_searches_loses_nothing(
    whole: FaultCluster, tmp_path: Path, kind: str
) -> None:
    cluster, faults = whole.cluster, whole.faults
    run = FaultRun(cluster, tmp_path, unique_name("fault"), open_index)
    run.prepare(1500)
    run.serve()
    docs = 5000
    events: list[Event] = []
    fault: list[threading.Thread] = []
    get_going = _load_until(run, docs, share=0.15)

    def one_fault() -> None:
        events.append(run_event(kind, cluster, faults, run.name, random.Random(7), hold_s=10))

    def inject(job: LoadJob) -> None:  # mid-load: a sixth of the documents are in
        get_going(job)
        fault.append(threading.Thread(target=one_fault))
        fault[0].start()

    try:
        outcome = run.load(docs, seed=5, tag="load", on_start=inject)
        fault[0].join(timeout=600)
    finally:
        run.stop_streams()
    (event,) = events
    log.info("%s: %s; load %s", kind, event.row(event.start), outcome)
    if event.role == "master" and kind in PARTITIONS:  # the majority chose another master
        assert event.new_master is not None and event.new_master != event.old_master, event
    assert event.error == "" and event.heal_to_green_s is not None
    assert outcome.exits[-1] == 0 and outcome.lost_acknowledged == [], outcome  # acked: never lost
    answers = run.answers()
    log.info("%s: answers %s", kind, answers.as_dict())
    assert set(answers.statuses) <= {200, 503}, answers.as_dict()  # never a 500
    # on the answers' own clock (monotonic `sent`): when the fault began and healed, each run ended
    when = {"fault": event.row(0.0), "runs_ended": outcome.ended}
    assert answers.statuses[200] > 20 and answers.mismatched == [], (answers.as_dict(), when)
    final = run.final_check()
    assert final.ok and final.count == 1500 + docs, final.as_dict()  # exactly the oracle's documents
    assert run.settings == {"index.refresh_interval": None, "index.number_of_replicas": "1"}


@pytest.mark.parametrize("fault_cluster", ["elasticsearch-7.17"], indirect=True)
def test_node_not_connected_items_are_retried_and_what_still_fails_is_reported_per_document(
    whole: FaultCluster, tmp_path: Path
) -> None:
    """Two nodes that are not the master cannot reach each other (connections reset, so each
    attempt fails at once): the master keeps both, so a bulk item for a primary on the other one
    fails for real with ``node_not_connected_exception`` (status 500). Retried with backoff it is
    written once the link heals; out of retries, each document is named (in ``--failures`` for
    ``vsparta index``) and ``--resume`` writes them."""
    cluster = whole.cluster
    name = unique_name("notconn")
    with open_on(whole.server(), name, create=True) as index:
        index.upsert([TermDocument(f"seed-{i}", {1: 1.0}) for i in range(20)])
    cluster.wait_green()
    # Elasticsearch retries a write to a replica it cannot reach for indices.replication.retry_timeout
    # (60 s) before failing that copy: the first bulk here took 60-80 s, and in one CI run (with the
    # resets then lost, bench/fault_net.py) 120 s, its timeout. Five seconds keep the test about the
    # items' failures, not the engine's patience.
    _replication_retry(cluster, "5s")
    try:
        _retried_and_reported(whole, tmp_path, name)
    finally:
        _replication_retry(cluster, None)


def _replication_retry(cluster: Any, timeout: str | None) -> None:
    body = json.dumps({"transient": {"indices.replication.retry_timeout": timeout}}).encode()
    request = urllib.request.Request(f"{cluster.url(0)}/_cluster/settings", body, method="PUT")
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=30) as answer:
        assert json.load(answer)["acknowledged"]


def _retried_and_reported(whole: FaultCluster, tmp_path: Path, name: str) -> None:
    cluster, faults = whole.cluster, whole.faults
    master = cluster.master()
    holders = cluster.primaries(name)
    far = next(n for n in holders if n != master)
    near = next(n for n in range(cluster.nodes) if n not in (master, far))
    a, b = cluster.addresses()[near], cluster.addresses()[far]
    faults.cut(a, b, reset=True)
    faults.cut(b, a, reset=True)
    near_only = (
        f"{'' if cluster.engine == 'elasticsearch' else cluster.engine + '+'}{cluster.url(near)}/{name}"
    )
    fast = {"shard_timeout": "1s", "initial_backoff": 0.2, "request_timeout": 60}
    docs = [TermDocument(f"a-{i:03d}", {1 + i % 7: 1.0 + i}) for i in range(60)]
    with open_index(near_only, max_retries=0, **fast) as index:
        with pytest.raises(DocumentsNotWritten) as refused:
            index.upsert(docs, refresh=False)
    failed = refused.value.failed
    assert failed and set(failed) <= {d.id for d in docs}
    assert all("node_not_connected_exception" in reason for reason in failed.values()), failed
    # The same documents through `vsparta index` (its code path): named one per line, then resumed.
    tokenizer = tokenizer_folder(tmp_path)
    job_docs = term_documents(300, 3, "job")
    source = write_jsonl(tmp_path / "job.jsonl", job_docs)
    from vsparta.indexer.runner import IndexConfig, run_index

    failures = tmp_path / "failures.jsonl"
    config = IndexConfig(input=source, backend=near_only, tokenizer=tokenizer, workers=0, failures=failures,
                         backend_options={"max_retries": 1, **fast})  # fmt: skip
    with pytest.raises(DocumentsNotWritten):
        run_index(config)
    lines = [line for line in failures.read_text().splitlines() if '"not_written"' in line]
    assert lines and all("node_not_connected_exception" in line for line in lines)
    # With retries, the same write waits out the cut: healed after a few seconds, all written.
    healer = threading.Timer(4.0, faults.heal)
    healer.start()
    with open_index(near_only, max_retries=8, **fast) as index:
        assert index.upsert(docs) == len(docs)
    healer.join()
    config.resume = True
    summary = run_index(config)
    assert summary.indexed > 0 and summary.indexed + summary.skipped == len(job_docs)
    with open_on(whole.server(), name) as index:
        report = check_documents(index, job_docs)
        assert report.ok, report.as_dict()
        index.refresh()
        assert index.count() == 20 + len(docs) + len(job_docs)
        index.drop()


@pytest.mark.parametrize(("fault_cluster", "kind"), scenarios(("soak",)), indirect=["fault_cluster"])
def test_the_soak_holds_the_index_to_the_oracle_under_random_faults(
    whole: FaultCluster, tmp_path: Path, kind: str
) -> None:
    """``vsparta bench soak``'s run, short, on this session's cluster: random kills, cuts and slow
    links during loads and searches; nothing acknowledged lost, no 500, no mix, the oracle's index."""
    opener = lambda spec: open_index(spec)  # noqa: E731
    result = run_soak(
        whole.cluster, whole.faults, tmp_path, opener, SOAK_MINUTES, list(KINDS), hold_s=10, seed=4
    )
    # at WARNING: what a failed run's captured log shows (CI prints only warnings)
    log.warning("soak: %s", {k: v for k, v in result.items() if k != "events"})
    for event in result["events"]:
        log.warning("event: %s", event)
    assert result["events"], "no fault was injected: nothing was tested"
    assert result["load_errors"] == [] and all(o["lost_acknowledged"] == 0 for o in result["loads"]), (
        result["loads"],
        result["events"],
    )
    statuses = result["answers"]["statuses"]
    # the whole answer report as one string (pytest shortens the repr of a tuple or a dict, as a
    # CI run's failure here once showed): the mismatch examples say which query, which hits and
    # when, against the events
    assert set(statuses) <= {"200", "503"} and result["answers"]["mismatched"] == 0, "\n".join(
        [json.dumps(result["answers"]), *(json.dumps(e) for e in result["events"])]
    )
    index = result["index"]
    assert index["lost"] == index["duplicated"] == index["wrong_weights"] == 0, index
    assert index["found"] == index["expected"] == index["count"]
    assert result["settings_after"] == {"index.refresh_interval": None, "index.number_of_replicas": "1"}
    assert result["left_behind"] == {}


@pytest.mark.parametrize("fault_cluster", ["elasticsearch-7.17", "opensearch-2.19"], indirect=True)
def test_hosts_of_two_clusters_are_refused_before_anything_is_written(
    whole: FaultCluster, tmp_path: Path, es_url: str, opensearch_url_of: Any
) -> None:
    """A spec naming a node of this cluster and the shared node of the same engine (another
    cluster): one sentence, exit 2, and no index on either; the service answers 503 saying so."""
    cluster = whole.cluster
    other = es_url if cluster.engine == "elasticsearch" else opensearch_url_of("2.19")
    name = unique_name("mixed")
    prefix = "" if cluster.engine == "elasticsearch" else f"{cluster.engine}+"
    spec = f"{prefix}http://{cluster.hosts().split(',')[0]},{other.removeprefix('http://')}/{name}"
    tokenizer = tokenizer_folder(tmp_path)
    source = write_jsonl(tmp_path / "docs.jsonl", term_documents(20, 1, "mixed"))
    for argv in (
        ["index", str(source), "--tokenizer", str(tokenizer)],
        ["search", "w1 w2", "--model", str(tokenizer)],
    ):
        proc = subprocess.run([sys.executable, "-m", "vsparta.cli", *argv, "--backend", spec],
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        said = [line for line in proc.stderr.splitlines() if "different clusters" in line]
        assert proc.returncode == 2 and len(said) == 1, (argv[0], proc.returncode, proc.stderr[-2000:])
        assert "Traceback" not in proc.stderr and "cluster UUIDs differ" in said[0]
    for url in (cluster.url(0), other):  # nothing was written anywhere
        code = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", f"{url}/{name}"],
                              capture_output=True, text=True).stdout  # fmt: skip
        assert code == "404", (url, code)
    from fastapi.testclient import TestClient

    from vsparta.service.app import create_app
    from vsparta.service.settings import ServiceSettings

    settings = ServiceSettings(backend=spec, model_path=tokenizer)
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        assert client.get("/ready").status_code == 503
        r = client.post("/search", json={"query": "w1 w2"})
        assert r.status_code == 503, r.text
