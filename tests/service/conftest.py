"""Fixtures for the service tests: real indexes of the same documents on both engines (no model)."""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from service_testdata import Corpus, make_corpus

from vsparta.cli import main
from vsparta.service.app import create_app
from vsparta.service.settings import ServiceSettings
from vsparta.termindex import open_index


@pytest.fixture(scope="session")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    return make_corpus(tmp_path_factory.mktemp("service-corpus"))


@pytest.fixture(scope="session")
def embedded_spec(corpus: Corpus) -> str:
    path = corpus.root / "embedded-index"
    index = open_index(f"embedded:{path}", create=True)
    index.upsert(corpus.docs)
    index.close()
    return f"embedded:{path}"


@pytest.fixture(scope="session")
def elastic_spec(es_url: str, corpus: Corpus) -> Iterator[str]:
    name = f"service-test-{uuid.uuid4().hex[:8]}"
    index = open_index(f"{es_url}/{name}", create=True)
    index.upsert(corpus.docs)
    refresh = getattr(index, "refresh", None)
    if callable(refresh):
        refresh()
    yield f"{es_url}/{name}"
    drop = getattr(index, "drop", None)
    if callable(drop):
        drop()
    index.close()


@pytest.fixture(scope="session")
def opensearch_specs(opensearch_url_of: Callable[[str], str], corpus: Corpus) -> Iterator[dict[str, str]]:
    """The corpus on each OpenSearch line (2.19, 3.x), opened lazily: ``{line: spec}``."""
    made: dict[str, tuple[str, Any]] = {}

    class Specs(dict):
        def __missing__(self, line: str) -> str:
            name = f"service-test-{uuid.uuid4().hex[:8]}"
            spec = f"opensearch+{opensearch_url_of(line)}/{name}"
            index = open_index(spec, create=True)
            index.upsert(corpus.docs)
            index.refresh()
            made[line] = (spec, index)
            self[line] = spec
            return spec

    yield Specs()
    for _, index in made.values():
        index.drop()
        index.close()


@pytest.fixture(params=["embedded", pytest.param("elasticsearch", marks=pytest.mark.elasticsearch)])
def backend_spec(request: pytest.FixtureRequest) -> str:
    """Each API test runs against both engines with the same documents."""
    fixture = {"embedded": "embedded_spec", "elasticsearch": "elastic_spec"}[request.param]
    return request.getfixturevalue(fixture)


@pytest.fixture(
    params=[
        "embedded",
        pytest.param("elasticsearch", marks=pytest.mark.elasticsearch),
        pytest.param("opensearch 2.19", marks=pytest.mark.elasticsearch),
        pytest.param("opensearch 3.x", marks=pytest.mark.elasticsearch),
    ]
)
def every_engine_spec(request: pytest.FixtureRequest) -> str:
    """The corpus on every engine whose statistics are its own (embedded postings, Elasticsearch's
    and each OpenSearch line's hit counts)."""
    if request.param.startswith("opensearch"):
        return request.getfixturevalue("opensearch_specs")[request.param.split()[1]]
    return request.getfixturevalue(f"{'elastic' if request.param == 'elasticsearch' else 'embedded'}_spec")


@pytest.fixture
def make_settings(corpus: Corpus, tmp_path: Path) -> Callable[..., ServiceSettings]:
    def make(backend: str, **overrides: Any) -> ServiceSettings:
        values: dict[str, Any] = {
            "backend": backend,
            "model_path": corpus.model_dir,
            "image_roots": [corpus.image_root],
            "thumbnail_cache_dir": tmp_path / "thumbs",
        }
        values.update(overrides)
        return ServiceSettings(**values)

    return make


def _client_of(spec: str, make_settings: Callable[..., ServiceSettings]) -> Iterator[TestClient]:
    with TestClient(create_app(make_settings(spec)), raise_server_exceptions=False) as c:
        yield c


@pytest.fixture
def client(backend_spec: str, make_settings: Callable[..., ServiceSettings]) -> Iterator[TestClient]:
    yield from _client_of(backend_spec, make_settings)


@pytest.fixture
def embedded_client(
    embedded_spec: str, make_settings: Callable[..., ServiceSettings]
) -> Iterator[TestClient]:
    yield from _client_of(embedded_spec, make_settings)


@pytest.fixture
def every_engine_client(
    every_engine_spec: str, make_settings: Callable[..., ServiceSettings]
) -> Iterator[TestClient]:
    yield from _client_of(every_engine_spec, make_settings)


@pytest.fixture(scope="session")
def need_service(pytestconfig: pytest.Config) -> Callable[[bool, str, str], None]:
    """``tests/conftest.py``'s helper (both conftests are named ``conftest``, so not importable)."""
    for plugin in pytestconfig.pluginmanager.get_plugins():
        fn = getattr(plugin, "require_service", None)
        if callable(fn):
            return fn
    raise RuntimeError("require_service not found in tests/conftest.py")


@pytest.fixture
def calibrated(corpus: Corpus, embedded_spec: str, tmp_path: Path) -> Path:
    """A copy of the corpus's model, calibrated on the corpus's images with their colour as caption."""
    model = tmp_path / "model"
    shutil.copytree(corpus.model_dir, model)
    manifest = tmp_path / "calibration.jsonl"
    colours = ("red", "blue", "green", "yellow")
    lines = [
        {"id": d.id, "image": f"{d.id}.png", "captions": [f"a {d.id.split('-')[0]} thing"]}
        for d in corpus.docs
        if d.id.split("-")[0] in colours
    ]
    manifest.write_text("".join(json.dumps(x) + "\n" for x in lines))
    argv = ["calibrate", str(manifest), "--model", str(model), "--index", embedded_spec, "--quantile", "0"]
    assert main(argv) == 0
    return model
