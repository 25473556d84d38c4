"""A fault cluster whose run was killed outright (SIGKILL: no teardown) is stopped by the next
run (``LocalCluster.reap_stale``), on a real Elasticsearch node; a live run's cluster is never
touched."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from vsparta.bench.fault_cluster import HOME_PREFIX, LocalCluster

pytestmark = pytest.mark.slow  # starts a node of its own (not the shared one)

# The owner's work dir is in a folder of the test's own, so that another run's reaping (the cluster
# tests beside this one) never races this test for its cluster.
OWNER = """
import sys, time
from pathlib import Path
from vsparta.bench.fault_cluster import LocalCluster, new_home
cluster = LocalCluster("elasticsearch-7.17", new_home(Path(sys.argv[1])), nodes=1).claim()
cluster.start()
print(cluster.home, cluster.url(0), flush=True)
time.sleep(3600)
"""


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=3):
            return True
    except OSError:
        return False


def test_the_nodes_of_a_killed_run_are_stopped_by_the_next_and_a_live_ones_kept(require) -> None:
    require(os.geteuid() == 0 and shutil.which("iptables") is not None, "root (nodes run as their own users)",
            "run as root after `bash scripts/install-system-deps.sh`")  # fmt: skip
    homes = Path(tempfile.mkdtemp(prefix="vsparta-reap-test-", dir="/var/tmp"))
    homes.chmod(0o755)  # the node's user must reach its work dir
    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(homes)], stdout=subprocess.PIPE, text=True)
    try:
        line = owner.stdout.readline() if owner.stdout else ""
        assert line, "the owner's cluster did not start"
        home, url = Path(line.split()[0]), line.split()[1]
        assert home.name.startswith(HOME_PREFIX) and answers(url)

        LocalCluster.reap_stale(homes)  # the owner lives and holds its block: nothing of it is touched
        assert home.is_dir() and answers(url)

        owner.send_signal(signal.SIGKILL)
        owner.wait(timeout=30)
        assert answers(url)  # a killed owner leaves its node running

        reaped = LocalCluster.reap_stale(homes)
        assert url.split("//")[1].split(":")[0] in reaped
        assert not home.exists()
        deadline = time.monotonic() + 30
        while answers(url) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not answers(url)
    finally:
        if owner.poll() is None:
            owner.kill()
        LocalCluster.reap_stale(homes)
        shutil.rmtree(homes, ignore_errors=True)
