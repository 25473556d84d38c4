"""scripts/venv.sh: demo.sh and test.sh install only when something that matters changed, and
without setuptools' "Editable installation" notice. A stand-in python records each pip call."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _checkout(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "venv.sh", repo / "scripts" / "venv.sh")
    shutil.copy(ROOT / "pyproject.toml", repo / "pyproject.toml")
    (repo / "bench").mkdir()
    shutil.copy(ROOT / "bench" / "pyproject.toml", repo / "bench" / "pyproject.toml")
    venv_bin = repo / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    python = venv_bin / "python"  # answers `-c` like Python; records anything else (pip) and succeeds
    python.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = "-c" ]; then exec {sys.executable} "$@"; fi\n'
        'echo "PYTHONWARNINGS=$PYTHONWARNINGS $*" >> "$(dirname "$0")/../pip-calls.log"\n'
    )
    python.chmod(0o755)
    vsparta = venv_bin / "vsparta"
    vsparta.write_text("#!/bin/sh\n")
    vsparta.chmod(0o755)
    return repo


def _ensure(repo: Path, extras: str) -> list[str]:
    log = repo / ".venv" / "pip-calls.log"
    before = log.read_text().splitlines() if log.exists() else []
    subprocess.run(
        ["bash", "-c", f'set -euo pipefail; source scripts/venv.sh; ensure_venv "{extras}"'],
        cwd=repo,
        check=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(repo)},
    )
    after = log.read_text().splitlines() if log.exists() else []
    return after[len(before) :]


def test_installs_once_then_only_when_pyproject_or_extras_change(tmp_path: Path) -> None:
    repo = _checkout(tmp_path)
    first = _ensure(repo, "model,service")
    assert any(call.endswith("pip install -q -e .[model,service]") for call in first)  # no benchmarks
    install = next(call for call in first if "-e ." in call)
    assert install.startswith("PYTHONWARNINGS=ignore:Editable installation ")
    assert _ensure(repo, "model,service") == []  # nothing changed: no pip at all
    assert any(call.endswith("-e .[all] -e ./bench") for call in _ensure(repo, "all"))  # + benchmarks
    assert _ensure(repo, "all") == []
    with (repo / "pyproject.toml").open("a") as f:
        f.write("\n# a dependency changed\n")
    assert any("-e .[all]" in call for call in _ensure(repo, "all"))
    with (repo / "bench" / "pyproject.toml").open("a") as f:
        f.write("\n# a benchmark's dependency changed\n")
    assert any(call.endswith("-e .[all] -e ./bench") for call in _ensure(repo, "all"))
    calls = _ensure(repo, "model,bench,service")  # `bench` is no extra of the product: its own package
    assert any(call.endswith("-e .[model,service] -e ./bench") for call in calls)
