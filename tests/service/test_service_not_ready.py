"""The API container's answer to a wrong model or images folder: stay up, say why on /ready.

The compose stack test (tests/docker) checks the same through a real container; these are the
fast checks of the sentence and the answers.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from vsparta.service.cli import setup_problem
from vsparta.service.not_ready import create_not_ready_app
from vsparta.service.settings import ServiceSettings


def settings(model: Path, images: Path) -> ServiceSettings:
    return ServiceSettings(
        backend="http://127.0.0.1:9/x", model_path=model, image_roots=[images], setup_errors="not-ready"
    )


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    d = tmp_path / "model"
    d.mkdir()
    (d / "tokenizer.json").write_text("{}")
    return d


@pytest.fixture
def images_dir(tmp_path: Path) -> Path:
    d = tmp_path / "images"
    d.mkdir()
    (d / "a.png").write_bytes(b"x")
    return d


def test_good_folders_are_no_problem(model_dir: Path, images_dir: Path) -> None:
    assert setup_problem(argparse.Namespace(), settings(model_dir, images_dir)) is None


def test_empty_model_folder_is_one_sentence_naming_the_variable(tmp_path: Path, images_dir: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    problem = setup_problem(argparse.Namespace(), settings(empty, images_dir))
    assert problem and "no tokenizer.json" in problem and "VSPARTA_MODEL" in problem
    assert "\n" not in problem


@pytest.mark.parametrize("make", [lambda d: None, lambda d: d.mkdir()], ids=["missing", "empty"])
def test_missing_or_empty_images_folder_is_a_problem(tmp_path: Path, model_dir: Path, make) -> None:
    images = tmp_path / "photos"
    make(images)
    problem = setup_problem(argparse.Namespace(), settings(model_dir, images))
    assert problem and "missing or empty" in problem and "VSPARTA_IMAGES" in problem


def test_not_ready_app_is_alive_but_answers_503_with_the_reason() -> None:
    client = TestClient(create_not_ready_app("the reason.", retry_after_s=7))
    assert client.get("/health").status_code == 200
    ready = client.get("/ready")
    assert ready.status_code == 503 and ready.headers["retry-after"] == "7"
    assert ready.json() == {"status": "not ready", "detail": "the reason."}
    search = client.post("/search", json={"query": "a red circle"})
    assert search.status_code == 503 and search.json() == {"detail": "the reason."}
    assert client.get("/").status_code == 503
