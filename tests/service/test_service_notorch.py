"""The query path never imports torch or transformers (docs/architecture.md section 1).

Checked twice: in a fresh interpreter that builds the app and answers every kind of request,
and in a real `vsparta serve` process run under ``python -X importtime`` (which logs every
module the process imports).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import urllib.request
from pathlib import Path

from service_testdata import Corpus, running_server, serve_args

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "transformers")

SCRIPT = textwrap.dedent(
    """
    import argparse, io, json, sys
    from fastapi.testclient import TestClient
    from vsparta.service.app import create_app
    from vsparta.service.settings import ServiceSettings
    from vsparta.service import cli_search

    backend, model, root = sys.argv[1:4]
    settings = ServiceSettings(backend=backend, model_path=model, image_roots=[root])
    with TestClient(create_app(settings)) as c:
        assert c.post("/search", json={"query": "red cube", "explain": True}).status_code == 200
        assert c.post("/search", json={"terms": {"red": 2.0}}).status_code == 200
        assert c.get("/images/red-cube/similar").status_code == 200
        assert c.get("/images/red-cube/thumbnail").status_code == 200
        assert c.get("/images/red-cube").status_code == 200
        assert c.get("/ready").status_code == 200
        assert c.get("/metrics").status_code == 200
        assert c.get("/").status_code == 200
    args = argparse.Namespace(query="blue sphere", backend=backend, model_path=model, k=3,
                              explain=True, json=True, all_results=False, min_score=0.0)
    out = io.StringIO()
    assert cli_search.run(args, out=out) == 0
    heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "transformers"))
    print(json.dumps({"heavy": heavy, "n_modules": len(sys.modules)}))
    """
)


def test_app_and_search_cli_do_not_import_torch(corpus: Corpus, embedded_spec: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, embedded_spec, str(corpus.model_dir), str(corpus.image_root)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["heavy"] == []
    assert report["n_modules"] > 100  # the app really was imported and run


def _imported_top_level(log_text: str) -> set[str]:
    """Top-level package names from ``-X importtime`` lines: 'import time: self | cum | name'."""
    names = set()
    for line in log_text.splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            name = line.rsplit("|", 1)[1].strip()
            names.add(name.split(".")[0])
            if name.startswith("vsparta."):  # the project's own packages, by folder (vsparta.service)
                names.add(".".join(name.split(".")[:2]))
    return names


def test_serve_process_does_not_import_torch(corpus: Corpus, embedded_spec: str) -> None:
    args = serve_args(corpus, embedded_spec)
    with running_server(args, importtime=True) as (url, proc):
        req = urllib.request.Request(
            f"{url}/search",
            data=json.dumps({"query": "red cube", "explain": True}).encode(),
            headers={"content-type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=10) as r:
            assert json.load(r)["results"][0]["id"] == "red-cube"
        with urllib.request.urlopen(f"{url}/images/red-cube/similar", timeout=10) as r:
            assert r.status == 200
    imported = _imported_top_level(proc.log_path.read_text())
    assert {"fastapi", "uvicorn", "tokenizers", "vsparta.service"} <= imported  # the log is complete
    assert not imported & set(HEAVY), sorted(imported & set(HEAVY))
