"""scripts/elasticsearch.sh: status tells the truth; start is idempotent; a full start/stop cycle
of each distribution it runs (Elasticsearch 7.17, OpenSearch 2.19 and 3.x); a port answering with
the other product is refused."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from elastic_testkit import free_port

pytestmark = pytest.mark.elasticsearch

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "elasticsearch.sh"


def script(*args: str, port: int, timeout: float = 60, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = os.environ | {"VSPARTA_ES_PORT": str(port)} | env
    return subprocess.run(
        ["bash", str(SCRIPT), *args], env=full_env, capture_output=True, text=True, timeout=timeout
    )


def test_status_is_true_while_the_node_runs(es_url: str) -> None:
    port = urlsplit(es_url).port or 9200
    res = script("status", port=port)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["status"] in ("green", "yellow")
    again = script("start", port=port)  # idempotent: nothing is started twice
    assert again.returncode == 0 and "already running" in again.stderr


def test_status_is_false_on_a_closed_port() -> None:
    res = script("status", port=free_port(), timeout=15)
    assert res.returncode == 1 and "not running" in res.stderr


def _request(url: str, method: str = "GET", body: dict | None = None) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper has exited already)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


# (flags, what GET / says): each distribution and line the script installs.
DISTRIBUTIONS = {
    "elasticsearch-7.17": ([], "7.17."),
    "opensearch-2.19": (["--distribution", "opensearch", "--version", "2"], "2.19."),
    "opensearch-3.x": (["--distribution", "opensearch", "--version", "3"], "3."),
}


@pytest.mark.slow
@pytest.mark.parametrize("dist", list(DISTRIBUTIONS))
def test_full_lifecycle_on_a_spare_port(es_url: str, dist: str) -> None:
    """Install into a fresh work dir (downloads cached), start, use rank_features, stop by pid."""
    flags, version = DISTRIBUTIONS[dist]
    port = free_port()
    home = Path(tempfile.mkdtemp(prefix="vsparta-es-test-", dir="/var/tmp"))
    home.chmod(0o755)  # the node's own user must reach it
    env = {"VSPARTA_ES_HOME": str(home), "VSPARTA_ES_HEAP": "256m"}

    def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return script(*args, *flags, port=port, timeout=timeout, **env)

    try:
        started = run("start", timeout=300)
        assert started.returncode == 0, started.stderr
        assert "green" in started.stderr
        pid = int(run("pids").stdout.split()[1])
        if os.geteuid() == 0:  # never run as root
            assert Path(f"/proc/{pid}").stat().st_uid != 0
        assert run("status").returncode == 0
        url = f"http://127.0.0.1:{port}"
        assert _request(f"{url}/")["version"]["number"].startswith(version)
        _request(f"{url}/rf", "PUT", {"mappings": {"properties": {"terms": {"type": "rank_features"}}}})
        _request(f"{url}/rf/_doc/a?refresh=true", "PUT", {"terms": {"3": 2.0}})
        clause = {"rank_feature": {"field": "terms.3", "log": {"scaling_factor": 1}, "boost": 2}}
        hits = _request(f"{url}/rf/_search", "POST", {"query": clause})["hits"]["hits"]
        assert hits[0]["_score"] == pytest.approx(2 * 1.0986123, rel=1e-6)  # 2 ln(1 + 2)
        stopped = run("stop")
        assert stopped.returncode == 0, stopped.stderr
        assert not _alive(pid)
        assert run("status").returncode == 1
        assert run("stop").returncode == 0  # stopping twice is fine
    finally:
        run("stop")
        shutil.rmtree(home, ignore_errors=True)


def test_a_port_answering_with_the_other_product_is_refused(es_url: str) -> None:
    port = urlsplit(es_url).port or 9200
    res = script("start", "--distribution", "opensearch", port=port, timeout=30)
    assert res.returncode == 1
    assert res.stderr.strip().endswith("it is elasticsearch, not opensearch: pick another --base-port")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--nodes", "0"], "--nodes must be a number from 1 to 99"),
        (["--nodes", "x"], "--nodes must be a number from 1 to 99"),
        (["--base-port", "80"], "--base-port must be a port from 1024"),
        (["--bogus"], "usage:"),
        (["--distribution", "solr"], "--distribution must be elasticsearch or opensearch"),
        (["--distribution", "opensearch", "--version", "9"], "--version must look like 2.19.6"),
    ],
)
def test_bad_cluster_options_are_refused_in_one_line(args: list[str], message: str) -> None:
    res = script("status", *args, port=free_port(), timeout=15)
    assert res.returncode != 0 and message in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_status_of_a_cluster_that_is_not_running_names_every_node() -> None:
    base = free_port()
    res = script("status", "--nodes", "3", "--base-port", str(base), port=9200, timeout=30)
    assert res.returncode == 1
    for i in range(3):
        assert f"not running at http://127.0.0.1:{base + i}" in res.stderr
