"""Named choices live in registries (``core.registry``): one module and one line per choice, names
listed without importing any choice, an unknown name refused in one sentence that lists the names."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from vsparta.core.registry import Registry, UnknownChoice
from vsparta.model.stems.registry import STEMS

REPO = Path(__file__).resolve().parents[1]


def test_a_registry_imports_a_choice_only_when_it_is_used(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "choice_one.py").write_text("CHOICE = 'one'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry: Registry[str] = Registry("colour", {"one": "choice_one", "two": "choice_missing"}, "CHOICE")
    assert registry.names() == ("one", "two") and "one" in registry and "three" not in registry
    assert "choice_one" not in sys.modules
    assert registry.get("one") == "one"
    with pytest.raises(UnknownChoice, match="unknown colour 'three': one of one, two"):
        registry.get("three")
    with pytest.raises(ValueError, match="already registered"):
        registry.register("one", "elsewhere")
    registry.register("three", "choice_one")
    assert registry.get("three") == "one"


def test_stem_names_are_read_without_torch() -> None:
    code = (
        "import sys; from vsparta.model.stems.registry import STEMS; "
        "print(','.join(STEMS.names()), 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.split() == [",".join(STEMS.names()), "False"]


@pytest.mark.parametrize("name", STEMS.names())
def test_every_registered_stem_is_a_vision_stem(name: str) -> None:
    from vsparta.model.stems.base import VisionStem

    assert issubclass(STEMS.get(name), VisionStem)


def test_only_the_stem_registry_names_stem_modules() -> None:
    """No if/elif on stem names outside the stems' own modules: the registry is the one dispatch."""
    offenders = []
    for path in sorted((REPO / "model").rglob("*.py")):
        if path.parent.name == "stems":
            continue
        text = path.read_text(encoding="utf-8")
        offenders += [f"{path.name}: {needle}" for needle in STEMS.names() if f'stem == "{needle}"' in text]
    assert offenders == []
