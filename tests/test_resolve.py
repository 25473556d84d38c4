"""Where a --model value points (model/resolve.py): local first, the hub only for org/name, fast."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from vsparta.model.resolve import (
    ModelPathError,
    existing_dir,
    existing_path,
    looks_like_hub_id,
    resolve_model_path,
)


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    folder = tmp_path / "final"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "tokenizer.json").write_text("{}")
    return folder


@pytest.fixture
def no_hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """An empty hub cache and a hub address where nothing listens (a closed local port)."""
    import huggingface_hub.constants

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub-cache"))
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)


def test_a_saved_folder_resolves_to_its_absolute_path(saved: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(saved.parent)
    assert resolve_model_path("final") == str(saved.resolve())
    assert resolve_model_path(saved, needs="tokenizer.json", hub=False) == str(saved.resolve())


def test_a_folder_without_the_needed_file_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(ModelPathError) as exc:
        resolve_model_path(tmp_path, option="--dense")
    assert str(exc.value) == f"--dense {tmp_path} is a folder but not a saved model (no config.json in it)"


def test_a_file_is_refused_unless_it_is_the_needed_file(saved: Path) -> None:
    with pytest.raises(ModelPathError, match=r"config\.json is a file; give the saved model folder"):
        resolve_model_path(saved / "config.json")
    tok = saved / "tokenizer.json"
    assert resolve_model_path(tok, needs="tokenizer.json", allow_file=True) == str(tok.resolve())


@pytest.mark.parametrize("value", ["/no/such/model", "./runs/final", "../x", "runs/final/", "a/b/c", "x"])
def test_a_missing_path_that_is_not_hub_shaped_fails_without_the_network(
    value: str, no_hub: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # From an empty folder: "../x" or "x" must not happen to exist beside the checkout (a clone
    # in /tmp/x made "../x" the checkout itself).
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    with pytest.raises(ModelPathError) as exc:
        resolve_model_path(value)
    assert str(exc.value) == f"--model {value}: no such folder"


def test_hub_shaped_values() -> None:
    assert looks_like_hub_id("sentence-transformers/all-MiniLM-L6-v2")
    assert looks_like_hub_id("runs/final")
    assert not any(looks_like_hub_id(v) for v in ["/abs/x", "./x", "a/b/c", "x", "org/config.json", "~/m"])


def test_missing_relative_path_fails_fast_when_the_hub_is_unreachable(no_hub: None) -> None:
    start = time.perf_counter()
    with pytest.raises(ModelPathError) as exc:
        resolve_model_path("runs/final")
    assert time.perf_counter() - start < 5  # transformers waited ~28 s before saying the same
    assert str(exc.value) == (
        "--model runs/final: no such folder, and the Hugging Face hub is unreachable to download it"
    )


def test_offline_mode_never_probes_the_network(no_hub: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr("vsparta.model.resolve._hub_reachable", lambda timeout: pytest.fail("probed the hub"))
    with pytest.raises(ModelPathError, match="not in the local Hugging Face cache"):
        resolve_model_path("runs/final", option="--init")


def test_hub_ids_stay_local_where_the_command_must_not_download(no_hub: None) -> None:
    with pytest.raises(ModelPathError) as exc:
        resolve_model_path("org/model", hub=False)
    assert str(exc.value) == "--model org/model: no such folder"


def test_a_hub_id_in_the_local_cache_resolves_to_its_snapshot(no_hub: None, tmp_path: Path) -> None:
    repo = tmp_path / "hub-cache" / "models--org--model"
    snapshot = repo / "snapshots" / "0123abc"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0123abc")
    assert resolve_model_path("org/model") == str(snapshot)


def test_argparse_path_types(tmp_path: Path) -> None:
    import argparse

    (tmp_path / "f.jsonl").write_text("")
    assert existing_path(str(tmp_path / "f.jsonl")) == str(tmp_path / "f.jsonl")
    assert existing_dir(str(tmp_path)) == str(tmp_path)
    with pytest.raises(argparse.ArgumentTypeError, match="no such file or folder"):
        existing_path(str(tmp_path / "missing.jsonl"))
    with pytest.raises(argparse.ArgumentTypeError, match="is a file, not a folder"):
        existing_dir(str(tmp_path / "f.jsonl"))
