"""A three-node cluster started by scripts/elasticsearch.sh loses a node (SIGKILL), the first
node of every client's host list included (clients name all three: a request that cannot reach
one node goes on to the next):

- in the middle of an indexing job: the job finishes or, rerun with ``--resume``, ends with exactly
  the documents of an uninterrupted run (count and a sample compared, at Elasticsearch's rounding);
- under a stream of ``POST /search`` requests to the real service app: every answer is 200 or 503
  with ``Retry-After``, never 500; ``/ready`` reports the cluster's health; once the node is
  back the cluster is green again and every query answers exactly as before.

Both happen during the same kill (one restart: a node takes most of a minute to rejoin on two
shared cores). A second test loads into the index being searched (the served version keeps its
replicas during a load): a node holding its primaries dies mid-load and every search answers 200.

It runs on Elasticsearch 7.17 and on OpenSearch 2.19 (``scripts/elasticsearch.sh --distribution
opensearch``; the 3.x line shares its cluster code and is left out to keep CI short).

Figures (requests answered, 503s, seconds back to green) are logged (``-o log_cli=true``).
"""

from __future__ import annotations

import json
import logging
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from elastic_testkit import FaultCluster, SearchServer, open_on, tokenizer_folder, unique_name

from vsparta.bench.fault_load import TOKEN_ID, WORDS, term_documents
from vsparta.termindex.base import TermDocument
from vsparta.termindex.oracle import round_like_elasticsearch

pytestmark = [pytest.mark.elasticsearch, pytest.mark.slow]
log = logging.getLogger(__name__)

NODES = 3


@dataclass
class Cluster:
    """The session's 3-node cluster of one engine line (``fault_cluster``), as these tests use it."""

    fc: FaultCluster

    def server(self) -> SearchServer:
        return self.fc.server()

    def script(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.fc.cluster.script(*args)

    def kill(self, i: int) -> None:
        self.fc.cluster.kill(i)

    def restart(self) -> float:
        """Start the missing node through the script (which waits for green); seconds taken."""
        took = self.fc.cluster.start()
        log.info("node back and cluster green after %.1fs", took)
        return took

    def primary_holder(self, index: str) -> int:
        """A node other than node 0 (the first of every client's host list) holding a primary."""
        held = self.fc.cluster.primaries(f"{index}*")
        log.info("primaries of %s per node: %s", index, held)
        others = [n for n in held if n != 0]
        assert others, f"every primary of {index} is on node 0: {held}"
        return others[0]

    def health(self, wait_for: str | None = None) -> dict:
        """The cluster's health; ``wait_for="green"`` waits up to 2 minutes for that status."""
        return self.fc.cluster.health(0, wait_for=wait_for)


@pytest.fixture
def cluster(fault_cluster: FaultCluster) -> Cluster:
    """Healed and whole (a test before may have failed with a node down), green."""
    fault_cluster.healthy()
    return Cluster(fault_cluster)


def test_the_script_runs_a_real_cluster(cluster: Cluster) -> None:
    h = cluster.health()
    assert h["status"] == "green" and h["number_of_data_nodes"] == NODES
    status = cluster.script("status")
    assert status.returncode == 0 and json.loads(status.stdout.splitlines()[0])["number_of_nodes"] == NODES
    pids = cluster.script("pids").stdout.split()
    assert len(pids) == 2 * NODES and all(p.isdigit() for p in pids)
    again = cluster.script("start")  # idempotent: nothing is started twice
    assert again.returncode == 0 and again.stderr.count("already running") == NODES


class SearchStream:
    """POST /search in a loop against the real service app (TestClient), counting statuses."""

    def __init__(self, client: Any, queries: list[str]) -> None:
        self.client = client
        self.queries = queries
        self.statuses: list[int] = []
        self.missing_retry_after = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        i = 0
        while not self.stop.is_set():
            r = self.client.post("/search", json={"query": self.queries[i % len(self.queries)], "k": 10})
            self.statuses.append(r.status_code)
            if r.status_code == 503 and "retry-after" not in r.headers:
                self.missing_retry_after += 1
            i += 1

    def answers(self) -> list[list[str]]:
        out = []
        for q in self.queries:
            r = self.client.post("/search", json={"query": q, "k": 10})
            assert r.status_code == 200, r.text
            out.append([h["id"] for h in r.json()["results"]])
        return out

    def counts(self) -> dict[int, int]:
        return {code: self.statuses.count(code) for code in sorted(set(self.statuses))}


def _index_job(export: Path, spec: str, tokenizer: Path, resume: bool) -> tuple[Any, BaseException | None]:
    """``vsparta index``'s code path over ``export`` into ``spec``, with short shard timeouts and
    few retries (a lost node fails it quickly); (summary, None) or (None, the error)."""
    from vsparta.indexer.runner import IndexConfig, run_index

    options = {"shard_timeout": "3s", "max_retries": 2, "initial_backoff": 0.2, "chunk_size": 100}
    config = IndexConfig(
        input=export, backend=spec, tokenizer=tokenizer, workers=0, resume=resume,
        commit_interval=0.05, backend_options=options,
    )  # fmt: skip
    try:
        return run_index(config), None
    except Exception as exc:  # noqa: BLE001 - the test inspects it
        return None, exc


def _ready_once_the_loss_is_seen(client: Any, within_s: float = 60) -> Any:
    """``GET /ready`` until it stops saying green. The cluster notices a dead node only after its
    fault detection's retries (a few seconds on idle cores, longer on busy ones); until then its
    health honestly says green, so a fixed sleep made this test depend on the machine's load."""
    deadline = time.monotonic() + within_s
    while True:
        r = client.get("/ready")
        if r.status_code != 200 or not r.json()["detail"].endswith("cluster green"):
            return r
        if time.monotonic() > deadline:
            return r
        time.sleep(0.5)


@pytest.mark.parametrize("victim", ["first node", "a primary holder"])
def test_losing_a_node_mid_load_and_mid_search_loses_nothing(
    cluster: Cluster, tmp_path: Path, victim: str
) -> None:
    """One SIGKILL, two victims: an indexing job writing one index and a search stream reading
    another (served with a replica on every shard) through the real service app. The killed node
    is the first of every client's host list, or another node that holds a primary of the load."""
    from fastapi.testclient import TestClient

    from vsparta.service.app import create_app
    from vsparta.service.settings import ServiceSettings

    tokenizer = tokenizer_folder(tmp_path, WORDS)
    token_id = TOKEN_ID
    # The searched index: loaded and served (replicas restored, force-merged) before the kill.
    served = term_documents(1500, 2, "doc")
    served_name = unique_name("stream")
    with open_on(cluster.server(), served_name, create=True) as index:
        with index.bulk_load():
            index.upsert(
                TermDocument(d["id"], {token_id[w]: x for w, x in d["terms"].items()}) for d in served
            )
        index.finish_load()
    # Its first load ran without replicas (an index the job creates is empty): they copy now.
    cluster.health(wait_for="green")
    rng = np.random.default_rng(3)
    queries = [" ".join(rng.choice(WORDS, size=4)) for _ in range(20)]
    settings = ServiceSettings(
        backend=cluster.server().spec(served_name), model_path=tokenizer, engine_timeout_s=3, retry_after_s=2
    )
    # The loaded index: an indexing job (the CLI's code path) writes it while the node dies.
    docs = term_documents(4000, 1, "doc")
    export = tmp_path / "docs.jsonl"
    export.write_text("".join(json.dumps(d) + "\n" for d in docs))
    loaded_name = unique_name("nodeloss")
    spec = cluster.server().spec(loaded_name)

    def job(resume: bool) -> tuple[Any, BaseException | None]:
        return _index_job(export, spec, tokenizer, resume)

    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        stream = SearchStream(client, queries)
        before = stream.answers()
        ready = client.get("/ready")
        assert ready.status_code == 200 and ready.json()["detail"].endswith("cluster green"), ready.text
        outcome: list[tuple[Any, BaseException | None]] = []
        runner = threading.Thread(target=lambda: outcome.append(job(resume=False)))
        runner.start()
        stream.thread.start()
        deadline = time.monotonic() + 180
        sample = [d["id"] for d in docs[:: len(docs) // 40]]
        with open_on(cluster.server(), loaded_name, create=True) as probe:
            while len(probe.existing_ids(sample)) < 8:  # a fifth of the documents are in
                going = time.monotonic() < deadline and runner.is_alive()
                assert going, f"the load never got going: {outcome}"
                time.sleep(0.2)
        cluster.kill(0 if victim == "first node" else cluster.primary_holder(loaded_name))
        assert runner.is_alive(), "the job ended before the node was killed: nothing was tested"
        try:
            degraded = _ready_once_the_loss_is_seen(client)
        except BaseException:
            stream.stop.set()  # the next case gets its cluster back, not a cascade of failures
            cluster.restart()
            raise
        log.info("/ready with a node down: %s %s", degraded.status_code, degraded.text)
        assert (
            degraded.status_code == 503 or "cluster yellow" in degraded.text or "cluster red" in degraded.text
        )
        runner.join(timeout=300)
        assert not runner.is_alive()
        summary, error = outcome[0]
        log.info("job with a node killed: %s", f"finished, {summary.indexed} indexed" if error is None
                 else f"failed: {error}")  # fmt: skip
        took = cluster.restart()
        time.sleep(1)
        stream.stop.set()
        stream.thread.join()
        assert client.get("/ready").json()["detail"].endswith("cluster green")
        after = stream.answers()
    if error is not None or summary.indexed + summary.skipped < len(docs):
        summary, error = job(resume=True)
        assert error is None, error
        log.info("resumed: %d skipped, %d indexed", summary.skipped, summary.indexed)
    counts = stream.counts()
    log.info("search stream: %s answers by status; back to green in %.1fs", counts, took)
    assert set(counts) <= {200, 503}, counts  # never a 500
    assert counts.get(200, 0) > 0 and stream.missing_retry_after == 0
    assert after == before  # nothing lost from the served index
    with open_on(cluster.server(), served_name) as index:
        assert index.count() == len(served)
        index.drop()
    with open_on(cluster.server(), loaded_name) as index:
        assert index.count() == len(docs)  # nothing lost, nothing duplicated (ids are unique)
        assert cluster.health(wait_for="green")["status"] == "green"  # the restored replicas recover
        (only,) = index._client.indices.get_settings(index=index.alias, flat_settings=True).values()
        assert only["settings"]["index.number_of_replicas"] == "1"  # restored after the load
        assert only["settings"]["index.number_of_shards"] == str(2 * NODES)  # two per data node
        for d in docs[::97]:
            got = index.get(d["id"])
            expected = {token_id[w]: float(round_like_elasticsearch(x)) for w, x in d["terms"].items()}
            assert {t: float(round_like_elasticsearch(w)) for t, w in got.weights.items()} == expected
            assert got.metadata == d["metadata"]
        index.drop()


def test_a_load_into_the_served_index_keeps_it_answering_when_a_node_dies(
    cluster: Cluster, tmp_path: Path
) -> None:
    """A load into the version the alias serves keeps its replicas (only refresh changes), so a
    node holding primaries of that index SIGKILLed mid-load leaves a copy of every shard: the
    search stream on that same index keeps answering 200, and the load ends with every document."""
    from fastapi.testclient import TestClient

    from vsparta.service.app import create_app
    from vsparta.service.settings import ServiceSettings

    tokenizer = tokenizer_folder(tmp_path, WORDS)
    token_id = TOKEN_ID
    name = unique_name("liveload")
    served = term_documents(1500, 2, "doc")
    with open_on(cluster.server(), name, create=True) as index:
        with index.bulk_load():
            index.upsert(
                TermDocument(d["id"], {token_id[w]: x for w, x in d["terms"].items()}) for d in served
            )
        index.finish_load()
    cluster.health(wait_for="green")
    more = [{**d, "id": f"more-{d['id']}"} for d in term_documents(4000, 5, "doc")]
    export = tmp_path / "more.jsonl"
    export.write_text("".join(json.dumps(d) + "\n" for d in more))
    rng = np.random.default_rng(4)
    queries = [" ".join(rng.choice(WORDS, size=4)) for _ in range(20)]
    spec = cluster.server().spec(name)
    settings = ServiceSettings(backend=spec, model_path=tokenizer, engine_timeout_s=3, retry_after_s=2)

    def job(resume: bool) -> tuple[Any, BaseException | None]:
        return _index_job(export, spec, tokenizer, resume)

    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        stream = SearchStream(client, queries)
        outcome: list[tuple[Any, BaseException | None]] = []
        runner = threading.Thread(target=lambda: outcome.append(job(resume=False)))
        runner.start()
        sample = [d["id"] for d in more[:: len(more) // 40]]
        deadline = time.monotonic() + 180
        with open_on(cluster.server(), name) as probe:
            while len(probe.existing_ids(sample)) < 8:  # a fifth of the new documents are in
                assert time.monotonic() < deadline and runner.is_alive(), f"no load: {outcome}"
                time.sleep(0.2)
            (during,) = probe._client.indices.get_settings(index=name, flat_settings=True).values()
        assert during["settings"]["index.refresh_interval"] == "-1"  # the load is on
        assert during["settings"]["index.number_of_replicas"] == "1"  # and kept the replicas
        stream.thread.start()
        time.sleep(1)
        cluster.kill(cluster.primary_holder(name))
        assert runner.is_alive(), "the job ended before the node was killed: nothing was tested"
        runner.join(timeout=300)
        assert not runner.is_alive()
        time.sleep(2)  # searches go on after the load with the node still down
        stream.stop.set()
        stream.thread.join()
        summary, error = outcome[0]
        log.info("live load with a node killed: %s", f"finished, {summary.indexed} indexed" if error is None
                 else f"failed: {error}")  # fmt: skip
        counts = stream.counts()
        log.info("search stream on the index being loaded: %s answers by status", counts)
        cluster.restart()
    assert counts.get(200, 0) > 20 and set(counts) == {200}, counts  # not one 503
    if error is not None or summary.indexed + summary.skipped < len(more):
        summary, error = job(resume=True)
        assert error is None, error
    with open_on(cluster.server(), name) as index:
        assert index.count() == len(served) + len(more)
        assert cluster.health(wait_for="green")["status"] == "green"
        index.drop()
