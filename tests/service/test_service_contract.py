"""The OpenAPI document says exactly what the server does: schemathesis, every check.

A real `vsparta serve` over a real embedded index, probed by the schemathesis command line as a
user would run it: the README's line, as written, from the repository root. Bounded examples keep it
near a minute on two cores; the seed is fixed so a failure can be replayed.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from service_testdata import Corpus, running_server, serve_args

REPO = Path(__file__).resolve().parents[2]
CONFIG = Path(__file__).with_name("schemathesis.toml")


def readme_command() -> list[str]:
    """The schemathesis line of the README, as a user copies it (run from the repository root)."""
    found = re.findall(r"^\s*(schemathesis .*/openapi\.json)\s*$", (REPO / "README.md").read_text(), re.M)
    assert len(found) == 1, found
    return shlex.split(found[0])


def _schemathesis(command: list[str], url: str, cwd: Path) -> str:
    """A ``schemathesis ... run --checks all URL`` command against ``url``, bounded; asserted to pass."""
    cli = shutil.which("schemathesis", path=str(Path(sys.executable).parent)) or shutil.which("schemathesis")
    assert cli, "schemathesis is in the test extra: pip install -e '.[test]'"
    assert command[0] == "schemathesis" and command[-1].endswith("/openapi.json"), command
    run = subprocess.run(
        [
            cli,
            *command[1:-1],
            "--max-examples",
            "40",
            "--seed",
            "20261123",
            "--no-color",
            f"{url}/openapi.json",
        ],
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
        # The README's line as written (its config file path is relative to the repository root).
        _schemathesis(readme_command(), url, REPO)
        _schemathesis(
            ["schemathesis", "--config-file", str(known_id), "run", "--checks", "all", "URL/openapi.json"],
            url,
            tmp_path,
        )
        server_log = proc.log_path.read_text()  # type: ignore[attr-defined]
    assert "Traceback" not in server_log, server_log[-3000:]  # no 500, no unhandled error


def test_readme_command_names_the_config_file_that_exists() -> None:
    command = readme_command()
    config = command[command.index("--config-file") + 1]
    assert (REPO / config).resolve() == CONFIG.resolve()
    assert command[command.index("run") :][:3] == ["run", "--checks", "all"]
