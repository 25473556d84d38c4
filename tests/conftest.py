"""Shared fixtures. Real services only: Elasticsearch and OpenSearch tests talk to real nodes.

Outside CI an absent node skips those tests with a message saying how to start one; in CI
(``CI=true``) it fails them, because a skipped test must never be counted as a pass there.

``gpu`` tests are different: no CI machine has a GPU, so where CUDA is absent they are
deselected at collection (never run, never counted as skipped or passed) and the run says so in
one line; ``scripts/gpu-check.sh`` runs them on a GPU machine.
"""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest

pytest_plugins = ["signal_teardown"]  # a SIGTERM'd run still runs every fixture's teardown

ES_URL_ENV = "VSPARTA_TEST_ES_URL"
DEFAULT_ES_URL = "http://127.0.0.1:9200"
# The two OpenSearch lines scripts/test.sh starts: (URL variable, default URL, how to start one).
OPENSEARCH_LINES = {
    "2.19": ("VSPARTA_TEST_OS2_URL", "http://127.0.0.1:9250", "--version 2 --base-port 9250"),
    "3.x": ("VSPARTA_TEST_OS3_URL", "http://127.0.0.1:9251", "--version 3 --base-port 9251"),
}


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def require_service(available: bool, what: str, how: str) -> None:
    """Skip (locally) or fail (in CI) when a real service the test needs is missing."""
    if available:
        return
    message = f"{what} is not available: {how}"
    if _in_ci():
        pytest.fail(f"CI must run this test. {message}", pytrace=False)
    pytest.skip(message)


GPU_DESELECTED = pytest.StashKey[int]()


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


LONG_FAULT_DESELECTED = pytest.StashKey[int]()
LONG_FAULTS_ENV = "VSPARTA_FAULT_SCENARIOS"


def _deselect(config: pytest.Config, items: list[pytest.Item], marker: str) -> int:
    chosen = [item for item in items if item.get_closest_marker(marker) is not None]
    if chosen:
        config.hook.pytest_deselected(items=chosen)
        items[:] = [item for item in items if item.get_closest_marker(marker) is None]
    return len(chosen)


FAULT_CLUSTER_FIXTURE = "fault_cluster"  # tests/termindex/conftest.py


@pytest.hookimpl(tryfirst=True)  # before `-m` selects: scripts/test.sh selects by this marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test on a local fault cluster ``cluster_faults`` (scripts/test.sh runs them in a
    process of their own beside the rest: they mostly wait on the engines); without CUDA,
    deselect ``gpu`` tests (torch is only imported when some were collected); unless
    ``VSPARTA_FAULT_SCENARIOS=all``, deselect ``long_fault`` tests (the fault scenarios beyond the
    share CI has time for; docs/cluster-faults-method.md)."""
    for item in items:
        if FAULT_CLUSTER_FIXTURE in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.cluster_faults)
    if os.environ.get(LONG_FAULTS_ENV) != "all":
        config.stash[LONG_FAULT_DESELECTED] = _deselect(config, items, "long_fault")
    if any(item.get_closest_marker("gpu") is not None for item in items) and not _cuda_available():
        config.stash[GPU_DESELECTED] = _deselect(config, items, "gpu")


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    n = config.stash.get(GPU_DESELECTED, 0)
    if n:
        terminalreporter.write_line(
            f"gpu: {n} test(s) deselected, not run: no CUDA device here (scripts/gpu-check.sh runs them)"
        )
    n = config.stash.get(LONG_FAULT_DESELECTED, 0)
    if n:
        terminalreporter.write_line(
            f"long_fault: {n} test(s) deselected, not run: fault scenarios beyond CI's time "
            f"({LONG_FAULTS_ENV}=all runs them; `vsparta bench soak` covers every kind)"
        )


@pytest.fixture
def float32_on_cuda() -> Iterator[None]:
    """Float32 on CUDA means float32 for the test: no TF32 in matrix products or convolutions
    (cuDNN allows TF32 convolutions by default), so a CUDA result can be held to a CPU one."""
    import torch

    matmul, conv = torch.backends.cuda.matmul, torch.backends.cudnn
    if hasattr(matmul, "fp32_precision"):  # torch >= 2.9; the allow_tf32 flags are on their way out
        before: tuple[Any, ...] = (matmul.fp32_precision, conv.conv.fp32_precision)
        matmul.fp32_precision = conv.conv.fp32_precision = "ieee"
    else:
        before = (matmul.allow_tf32, conv.allow_tf32)
        matmul.allow_tf32 = conv.allow_tf32 = False
    try:
        yield
    finally:
        if hasattr(matmul, "fp32_precision"):
            matmul.fp32_precision, conv.conv.fp32_precision = before
        else:
            matmul.allow_tf32, conv.allow_tf32 = before


def _answers(url: str) -> bool:
    """A GET of ``url`` answers 200 within 5 s."""
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _healthy(url: str) -> bool:
    return _answers(f"{url}/_cluster/health")


@pytest.fixture(scope="session")
def answers() -> Callable[[str], bool]:
    """``f(url)``: a GET of the URL answers 200 (a server started: its health route)."""
    return _answers


@pytest.fixture(scope="session")
def es_url() -> str:
    """URL of a running Elasticsearch node (``scripts/elasticsearch.sh start`` starts one)."""
    url = os.environ.get(ES_URL_ENV, DEFAULT_ES_URL)
    require_service(_healthy(url), f"Elasticsearch at {url}", "run `bash scripts/elasticsearch.sh start`")
    return url


def _opensearch_url(line: str) -> str:
    env, default, args = OPENSEARCH_LINES[line]
    url = os.environ.get(env, default)
    how = f"run `bash scripts/opensearch.sh start {args}` (or set {env})"
    require_service(_healthy(url), f"OpenSearch {line} at {url}", how)
    return url


@pytest.fixture(scope="session", params=list(OPENSEARCH_LINES))
def os_url(request: pytest.FixtureRequest) -> str:
    """URL of a running OpenSearch node, once per line the project supports (2.19 and 3.x)."""
    return _opensearch_url(request.param)


@pytest.fixture(scope="session")
def opensearch_url_of() -> Callable[[str], str]:
    """``f(line)``: the URL of the running OpenSearch node of a line (skipped/failed when absent)."""
    return _opensearch_url


@pytest.fixture(scope="session")
def require() -> Callable[[bool, str, str], None]:
    """``require_service`` for fixtures that start their own node (a test module cannot import
    this conftest: tests/termindex has its own)."""
    return require_service


@pytest.fixture(autouse=True, scope="session")
def _few_threads() -> None:
    """Two cores here: keep torch from oversubscribing when tests run beside an ES node."""
    try:
        import torch
    except ImportError:
        return
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
