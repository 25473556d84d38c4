"""No project module over 400 lines (issue 33): a module that grows past it does more than one job.

Counted like ``wc -l`` over every package's ``.py`` files (``test_import_cycles.PACKAGES``); tests
are not counted.
"""

from __future__ import annotations

from test_import_cycles import PACKAGES, ROOT

MAX_LINES = 400


def test_no_module_is_over_400_lines() -> None:
    sizes = {
        p.relative_to(ROOT).as_posix(): p.read_bytes().count(b"\n")
        for pkg in PACKAGES
        for p in (ROOT / pkg).rglob("*.py")
    }
    assert len(sizes) > 100  # every package was read
    assert {path: n for path, n in sizes.items() if n > MAX_LINES} == {}
