"""A backend spec names several nodes; a client reaches the index while any of them answers.

``http://es01:9200,es02:9200,es03:9200/vsparta``: every request that cannot connect to one node
goes on to the next at once. A malformed host list, or one naming a node twice, is refused in one
sentence (the spec's parser, so `vsparta index`, `vsparta serve` and the service settings all say
the same). Hosts of two clusters: tests/termindex/test_elastic_partitions.py.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from elastic_testkit import FaultProxy, free_port

from vsparta.cli import main
from vsparta.termindex import open_index, parse_spec
from vsparta.termindex.base import TermDocument
from vsparta.termindex.elastic.index_async import AsyncElasticsearchIndex

DOCS = [TermDocument(f"d{i}", {i + 1: 2.0, 100: 1.0}) for i in range(5)]


def test_a_host_list_parses_into_one_url_per_node() -> None:
    spec = parse_spec("http://es01:9200,es02:9200,es03:9200/vsparta")
    assert spec.location == "http://es01:9200,http://es02:9200,http://es03:9200"
    assert spec.name == "vsparta"
    assert parse_spec("https://127.0.0.1:9200/x").location == "https://127.0.0.1:9200"  # one node as before


@pytest.mark.parametrize(
    "spec",
    [
        "http://127.0.0.1:29400,127.0.0.1:port/x",
        "http://es01:9200,,es02:9200/x",
        "http://es01:9200,/x",
        "http://es01:99999/x",
        "http://es01:9200, es 02:9200/x",
        "http://user@es01:9200/x",
    ],
)
def test_a_malformed_host_list_is_refused_in_one_sentence(spec: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_spec(spec)
    message = str(err.value)
    assert "is not HOST:PORT" in message and "HOST:PORT,HOST:PORT/INDEX" in message
    assert "\n" not in message and "cast" not in message


@pytest.mark.parametrize("command", [["index", "INPUT", "--fake-encoder"], ["search", "red"], ["serve"]])
def test_commands_refuse_a_malformed_host_list_with_exit_2(
    command: list[str], capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    from PIL import Image

    Image.new("RGB", (8, 8)).save(tmp_path / "a.png")
    command = [str(tmp_path) if c == "INPUT" else c for c in command]
    assert main([*command, "--backend", "http://127.0.0.1:29400,127.0.0.1:port/x"]) == 2
    said = capsys.readouterr().err + caplog.text
    assert "is not HOST:PORT" in said and "Traceback" not in said


@pytest.mark.elasticsearch
def test_a_dead_first_node_is_skipped_by_writes_and_reads(es_url: str) -> None:
    spec = f"http://127.0.0.1:{free_port()},{es_url.removeprefix('http://')}/hosts-{uuid.uuid4().hex[:8]}"
    index = open_index(spec, create=True)
    try:
        assert index.upsert(DOCS) == len(DOCS)
        index.refresh()
        assert index.count() == len(DOCS)
        assert [h.id for h in index.search({1: 1.0}, k=1)] == ["d0"]

        async def read() -> tuple[int, list[str]]:
            reader = AsyncElasticsearchIndex(parse_spec(spec).location, parse_spec(spec).name)
            try:
                return await reader.count(), [h.id for h in await reader.search({2: 1.0}, k=1)]
            finally:
                await reader.close()

        assert asyncio.run(read()) == (len(DOCS), ["d1"])
    finally:
        index.drop()
        index.close()


@pytest.mark.elasticsearch
def test_a_node_lost_while_the_client_runs_is_skipped(es_url: str) -> None:
    """The first node answers, then stops (connection refused): requests go on to the other."""
    with FaultProxy(es_url) as first:
        spec = f"{first.url},{es_url.removeprefix('http://')}/hosts-{uuid.uuid4().hex[:8]}"
        index = open_index(spec, create=True)
        try:
            index.upsert(DOCS[:2])
            first.stop()
            for _ in range(4):  # round robin would send every other request to the lost node
                assert index.upsert(DOCS[2:]) == 3
            index.refresh()
            assert index.count() == len(DOCS)
        finally:
            index.drop()
            index.close()


@pytest.mark.elasticsearch
@pytest.mark.parametrize("command", [["index", "INPUT", "--fake-encoder"], ["search", "red"], ["serve"]])
def test_a_node_listed_twice_is_refused_before_anything_is_written(
    es_url: str, command: list[str], capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
) -> None:  # fmt: skip
    """The real node named twice: one sentence, exit 2, a settings error for the service, and no
    index created."""
    import urllib.error
    import urllib.request

    from PIL import Image
    from pydantic import ValidationError

    from vsparta.service.settings import ServiceSettings

    Image.new("RGB", (8, 8)).save(tmp_path / "a.png")
    host = es_url.removeprefix("http://")
    name = f"twice-{uuid.uuid4().hex[:8]}"
    spec = f"http://{host},{host}/{name}"
    command = [str(tmp_path) if c == "INPUT" else c for c in command]
    assert main([*command, "--backend", spec]) == 2
    said = capsys.readouterr().err + caplog.text
    assert f"lists {host} twice" in said and "Traceback" not in said
    with pytest.raises(ValidationError, match="twice"):
        ServiceSettings(backend=spec, model_path=tmp_path)
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(f"{es_url}/{name}", timeout=5)
    assert missing.value.code == 404
