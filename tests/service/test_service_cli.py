"""`vsparta serve` and `vsparta search` as users run them (subprocesses, real index)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

from service_testdata import Corpus, running_server, serve_args

REPO = Path(__file__).resolve().parents[2]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vsparta.cli", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        timeout=120,
    )


def test_search_cli_prints_a_table(corpus: Corpus, embedded_spec: str) -> None:
    proc = _cli("search", "red cube", "--backend", embedded_spec, "--model", str(corpus.model_dir), "-k", "3")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("query tokens: red cube")
    assert lines[1] == "images holding each word (of 19): red 3, cube 4"
    assert re.match(r"\s+1\s+\d+\.\d{4}\s+red-cube\s+shapes/red-cube.png", lines[3])
    assert len(lines) == 6


def test_search_cli_explain_and_json(corpus: Corpus, embedded_spec: str) -> None:
    base = ["search", "blue sphere", "--backend", embedded_spec, "--model", str(corpus.model_dir), "-k", "2"]
    proc = _cli(*base, "--explain")
    assert proc.returncode == 0, proc.stderr
    assert "sphere w=" in proc.stdout and "blue w=" in proc.stdout
    proc = _cli(*base, "--explain", "--json")
    assert proc.returncode == 0, proc.stderr
    body = json.loads(proc.stdout)
    assert body["query_tokens"] == ["blue", "sphere"]
    assert body["results"][0]["id"] == "blue-sphere"
    assert {t["token"] for t in body["results"][0]["terms"]} == {"blue", "sphere"}
    assert "image" not in body["results"][0]["metadata"]  # the same JSON as POST /search: no paths


def test_search_cli_errors(corpus: Corpus, embedded_spec: str, tmp_path: Path) -> None:
    model = str(corpus.model_dir)
    assert _cli("search", "  ", "--backend", embedded_spec, "--model", model).returncode == 2
    assert _cli("search", "red", "--backend", embedded_spec, "--model", model, "-k", "0").returncode == 2
    missing = _cli("search", "red", "--backend", f"embedded:{tmp_path / 'none'}", "--model", model)
    assert missing.returncode == 2  # a wrong path is the user's mistake, not an outage (3)
    assert "build one with `vsparta index IMAGES --backend" in missing.stderr
    no_model = _cli("search", "red", "--backend", embedded_spec)
    assert no_model.returncode == 2
    assert "VSPARTA_MODEL_PATH" in no_model.stderr


def test_serve_runs_the_app_and_flags_override_env(corpus: Corpus, embedded_spec: str) -> None:
    args = serve_args(corpus, embedded_spec)
    env = {"VSPARTA_BACKEND": "embedded:/nonexistent", "VSPARTA_MAX_K": "5"}
    with running_server([*args, "--max-k", "7"], env_extra=env) as (url, _proc):
        with urllib.request.urlopen(f"{url}/ready", timeout=10) as r:
            assert json.load(r)["status"] == "ready"  # --backend beat VSPARTA_BACKEND
        req = urllib.request.Request(
            f"{url}/search",
            data=json.dumps({"query": "red cube", "k": 7}).encode(),
            headers={"content-type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=10) as r:
            assert json.load(r)["results"][0]["id"] == "red-cube"
        req.data = json.dumps({"query": "red cube", "k": 8}).encode()
        try:
            urllib.request.urlopen(req, timeout=10)
            raise AssertionError("k=8 should be over --max-k 7")
        except urllib.error.HTTPError as exc:
            assert exc.code == 422
        with urllib.request.urlopen(f"{url}/images/red-cube/thumbnail", timeout=10) as r:
            assert r.headers["content-type"] == "image/jpeg"
        with urllib.request.urlopen(f"{url}/", timeout=10) as r:
            assert "<title>" in r.read().decode()


def test_serve_refuses_a_missing_model(tmp_path: Path) -> None:
    proc = _cli("serve", "--backend", "embedded:x", "--model", str(tmp_path / "nope"))
    assert proc.returncode == 2
    assert f"--model {tmp_path / 'nope'}: no such folder" in proc.stderr
