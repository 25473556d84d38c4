"""The ground floor (``core/``, every module) and the torch-free side of ``model/`` (the list is
``model.TORCH_FREE``) stay torch-free.

The service and the indexer's decode workers import these modules; if one of them pulled in torch
the service image would need it and every worker would pay seconds of start-up. Each module is
imported in a fresh interpreter, so an import anywhere down its chain is caught.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from vsparta import model

REPO = Path(__file__).resolve().parents[1]


TORCH_FREE = [f"vsparta.model.{name}" for name in model.TORCH_FREE] + [
    f"vsparta.core.{p.stem}" for p in sorted((REPO / "core").glob("*.py")) if p.stem != "__init__"
]


@pytest.mark.parametrize("module", TORCH_FREE)
def test_module_imports_without_torch(module: str) -> None:
    code = (
        f"import sys, {module}; "
        "heavy = sorted(m for m in ('torch', 'transformers') if m in sys.modules); "
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"{module} imports {out.stdout.strip()}"


def test_every_listed_module_exists_and_the_torch_side_is_not_listed() -> None:
    present = {p.stem for p in (REPO / "model").glob("*.py")}
    assert set(model.TORCH_FREE) <= present
    assert "modeling" not in model.TORCH_FREE and "encode" not in model.TORCH_FREE
