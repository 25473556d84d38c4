"""`vsparta index` says a mistake before the expensive part (issue 24): every argument is checked
before the model loads, the input is listed or an engine is opened, and the mistake is one
sentence with exit code 2; `-v` shows the traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from vsparta.cli import UsageError, main
from vsparta.indexer import stages


@pytest.fixture
def nothing_expensive(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The model loader, the listing and the engine, each replaced by a tripwire that records a call."""
    reached: list[str] = []

    def tripwire(name: str):
        def called(*_args, **_kwargs):
            reached.append(name)
            raise AssertionError(f"{name} reached before the arguments were checked")

        return called

    monkeypatch.setattr(stages, "load_encoder", tripwire("model loader"))
    monkeypatch.setattr(stages, "iter_items", tripwire("listing"))
    monkeypatch.setattr(stages, "open_backend", tripwire("engine"))
    return reached


def _mistakes(tmp: Path) -> list[tuple[list[str], str]]:
    a_file = tmp / "a-file"
    a_file.write_text("x")
    idx = f"embedded:{tmp / 'idx'}"
    return [
        (["--backend", "embeded:/x"], "unknown backend 'embeded:/x': use embedded:/path/to/index or http://"),
        (["--backend", "es://h:9200/x"], "unknown backend 'es://h:9200/x'"),
        (["--backend", "http://127.0.0.1:9200"], "Elasticsearch spec must be http://HOST:PORT/INDEX"),
        (["--backend", f"embedded:{a_file}"], f"--backend {a_file} is a file, not a folder"),
        (
            ["--backend", f"embedded:{a_file}/idx"],
            f"--backend {a_file}/idx: {a_file} is a file, not a folder",
        ),
        (["--backend", idx, "--shards", "2"], "--shards, --replicas and --new-version need an Elasticsearch"),
        (["--backend", "http://h:9200/x", "--shards", "0"], "--shards must be >= 1, got 0"),
        (["--backend", "http://h:9200/x", "--replicas", "-1"], "--replicas must be >= 0, got -1"),
        (["--backend", idx, "--shard", "2", "--num-shards", "2"], "--shard must be in [0, 1], got 2"),
        (["--backend", idx, "--num-shards", "0"], "--num-shards must be >= 1, got 0"),
        (["--backend", idx, "--batch-size", "0"], "--batch-size must be >= 1, got 0"),
        (["--backend", idx, "--workers", "-1"], "--workers must be >= 0, got -1"),
        (["--backend", idx, "--commit-interval", "-1"], "--commit-interval must be in [0, 3600] seconds"),
        (["--backend", idx, "--max-pixels", "0"], "--max-pixels must be >= 1, got 0"),
        (["--backend", idx, "--device", "tpu"], "--device must be auto, cpu or cuda, got 'tpu'"),
        (["--backend", idx, "--fake-image-size", "0"], "--fake-image-size must be >= 1, got 0"),
        (["--export-jsonl", str(a_file)], f"--export-jsonl {a_file} is a file, not a folder"),
        (["--backend", idx, "--failures", str(tmp)], f"--failures {tmp} is a folder, not a file"),
        (["--export-jsonl", str(tmp / "e"), "--export-docs-per-file", "0"], "--export-docs-per-file must be"),
        ([], "nothing to write to: give --backend and/or --export-jsonl"),
        (["--backend", idx, "--model", str(tmp / "none")], f"--model {tmp / 'none'}: no such folder"),
    ]


def test_every_argument_mistake_is_one_sentence_before_anything_expensive(
    image_folder: Path, tmp_path: Path, nothing_expensive: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    for extra, sentence in _mistakes(tmp_path):
        model = [] if "--model" in extra else ["--fake-encoder"]
        rc = main(["index", str(image_folder), *model, *extra])
        err = capsys.readouterr().err
        assert rc == 2, (extra, err)
        assert err.startswith(f"vsparta index: error: {sentence}"), (extra, err)
        assert err.count("\n") == 1 and "Traceback" not in err
    assert nothing_expensive == []
    assert not (tmp_path / "idx").exists()  # no index folder left behind by a refused job


def test_images_without_a_model_are_refused_before_the_listing(
    image_folder: Path, tmp_path: Path, nothing_expensive: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    rc = main(["index", str(image_folder), "--backend", f"embedded:{tmp_path / 'idx'}"])
    assert rc == 2 and nothing_expensive == []
    assert capsys.readouterr().err == (
        "vsparta index: error: --model (or --fake-encoder) is required to encode images or regions\n"
    )


def test_a_real_model_is_not_loaded_for_a_bad_backend(
    image_folder: Path, tiny_model: Path, nothing_expensive: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    rc = main(["index", str(image_folder), "--model", str(tiny_model), "--backend", "embeded:/x"])
    assert rc == 2 and nothing_expensive == []
    assert "unknown backend 'embeded:/x'" in capsys.readouterr().err


def test_verbose_shows_the_traceback(image_folder: Path, nothing_expensive: list[str]) -> None:
    with pytest.raises(UsageError, match="unknown backend 'embeded:/x'") as caught:
        main(["-v", "index", str(image_folder), "--fake-encoder", "--backend", "embeded:/x"])
    assert isinstance(caught.value.__cause__, ValueError)  # parse_spec's own error, chained
    assert nothing_expensive == []


def test_verbose_traceback_from_the_console_script(image_folder: Path) -> None:
    cmd = [sys.executable, "-m", "vsparta.cli", "-v", "index", str(image_folder), "--backend", "embeded:/x"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode != 0
    assert "Traceback (most recent call last)" in proc.stderr
    assert "UsageError: unknown backend 'embeded:/x'" in proc.stderr
