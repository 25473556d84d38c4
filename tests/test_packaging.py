"""The wheel users install holds every module of the source tree and nothing of bench/.

pyproject.toml lists the packages by hand (the folders install under vsparta.*), so a new
sub-package is easy to forget: the tests, which import from the source tree, would pass and
the Docker images (built from the wheel) would fail at their first import.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCE_ROOTS = {
    "vsparta": "vsparta",
    "core": "vsparta/core",
    "model": "vsparta/model",
    "indexer": "vsparta/indexer",
    "termindex": "vsparta/termindex",
    "service": "vsparta/service",
    "scenes": "vsparta/scenes",
}


def source_modules() -> set[str]:
    """Every .py file of the installable folders, as the path it has inside the wheel."""
    found = set()
    for folder, installed in SOURCE_ROOTS.items():
        for path in (REPO / folder).rglob("*.py"):
            if "__pycache__" in path.parts:
                continue
            found.add(f"{installed}/{path.relative_to(REPO / folder).as_posix()}")
    return found


def test_the_wheel_holds_every_source_module_and_no_benchmark(tmp_path: Path) -> None:
    # Built from a copy: setuptools keeps a build/ folder in the source tree that would hide
    # a package left out of the list behind an earlier build's files.
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    for folder in SOURCE_ROOTS:
        shutil.copytree(REPO / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "--wheel-dir",
            str(tmp_path),
            str(source),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("vsparta-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = sorted(source_modules() - names)
    assert not missing, f"pyproject.toml's packages leave these modules out of the wheel: {missing}"
    assert not [n for n in names if n.startswith("bench/") or "/bench/" in n]
    assert "vsparta/service/static/index.html" in names
