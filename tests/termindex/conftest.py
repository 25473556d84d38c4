"""The ``search_server`` fixture: each engine line speaking the Elasticsearch protocol, in turn; the
``fault_cluster`` fixture: a local 3-node cluster per engine line, to kill nodes of and cut apart."""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from elastic_testkit import ENGINE_LINES, FaultCluster, SearchServer

from vsparta.bench.fault_cluster import LocalCluster, new_home
from vsparta.bench.fault_net import NetFaults


@pytest.fixture(scope="session", params=list(ENGINE_LINES))
def search_server(request: pytest.FixtureRequest, opensearch_url_of: Callable[[str], str]) -> SearchServer:
    """Elasticsearch 7.17, OpenSearch 2.19 and 3.x: tests of the shared protocol run on each."""
    engine, line = ENGINE_LINES[request.param]
    url = request.getfixturevalue("es_url") if engine == "elasticsearch" else opensearch_url_of(line)
    return SearchServer(engine, url)


# The engine lines whose local 3-node clusters tests break (3.x shares their cluster code and is
# left out to keep CI short).
CLUSTER_LINES = ["elasticsearch-7.17", "opensearch-2.19"]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failed test on a fault cluster shows the tail of every node's log: the nodes' work dir is
    gone once the session ends, and a CI log is all that is left of a run."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if report.when != "call" or not report.failed:
        return
    clusters = [v for v in getattr(item, "funcargs", {}).values() if isinstance(v, FaultCluster)]
    if clusters:
        report.sections.append(("the fault cluster's node logs (tails)", clusters[0].cluster.logs(25)))


@pytest.fixture(scope="session", params=CLUSTER_LINES)
def fault_cluster(request: pytest.FixtureRequest, es_url: str, require: Any) -> Iterator[FaultCluster]:
    """Three nodes beside the shared ones, each on its own loopback address (127.0.0.2x-style,
    never 127.0.0.1) and run as its own user, so iptables rules of this session only (its own
    chains, removed at the end and by the next session if this one is killed) can cut them
    apart; own ports, own work dir, small heaps. Started once per engine line per session; a
    killed session's nodes are stopped by the next one (``LocalCluster.reap_stale``)."""
    require(os.geteuid() == 0 and shutil.which("iptables") is not None, "root with iptables",
            "run the tests as root after `bash scripts/install-system-deps.sh`")  # fmt: skip
    for name in ("elasticsearch", "elasticsearch.trace"):  # every request (and body) otherwise
        logging.getLogger(name).setLevel(logging.WARNING)
    LocalCluster.reap_stale()
    home = new_home()
    cluster = LocalCluster(request.param, home).claim()
    faults = NetFaults(cluster.addresses()).install()
    try:
        faults.own_sources(cluster.users())  # before the nodes start: NAT decides per connection
        cluster.start()
        yield FaultCluster(cluster, faults)
    finally:
        faults.close()
        cluster.stop()
        shutil.rmtree(home, ignore_errors=True)
