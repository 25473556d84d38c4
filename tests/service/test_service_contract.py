"""The OpenAPI document says exactly what the server does: schemathesis, every check.

A real `vsparta serve` over a real embedded index, probed by the schemathesis command line as a
user would run it (`schemathesis run --checks all URL/openapi.json`). Bounded examples keep it
near a minute on two cores; the seed is fixed so a failure can be replayed.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from service_testdata import Corpus, running_server, serve_args

CONFIG = Path(__file__).with_name("schemathesis.toml")


def _schemathesis(url: str, config: Path, cwd: Path) -> str:
    """``schemathesis run --checks all`` with bounded examples; the report, asserted to pass."""
    cli = shutil.which("schemathesis", path=str(Path(sys.executable).parent)) or shutil.which("schemathesis")
    assert cli, "schemathesis is in the test extra: pip install -e '.[test]'"
    run = subprocess.run(
        [cli, "--config-file", str(config), "run", "--checks", "all", "--max-examples", "40"]
        + ["--seed", "20261123", "--no-color", f"{url}/openapi.json"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
    )
    report = run.stdout + run.stderr
    assert run.returncode == 0, report[-6000:]
    assert re.search(r"(\d+) generated, \1 passed", report), report[-3000:]
    return report


@pytest.mark.slow
def test_openapi_contract_holds_under_schemathesis(
    corpus: Corpus, embedded_spec: str, tmp_path: Path
) -> None:
    # Second pass: image routes with an id that exists, so their 200 answers are checked too
    # (random ids only reach the 404s).
    known_id = tmp_path / "known-id.toml"
    known_id.write_text(CONFIG.read_text() + '\n[parameters]\n"path.doc_id" = "red-cube"\n')
    args = serve_args(corpus, embedded_spec)
    with running_server(args) as (url, proc):
        _schemathesis(url, CONFIG, tmp_path)
        _schemathesis(url, known_id, tmp_path)
        server_log = proc.log_path.read_text()  # type: ignore[attr-defined]
    assert "Traceback" not in server_log, server_log[-3000:]  # no 500, no unhandled error
