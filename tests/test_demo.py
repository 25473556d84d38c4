"""The demo rebuilds an embedded index that an older version left in an older on-disk format."""

from __future__ import annotations

import json
from pathlib import Path

from termindex.base import TermDocument
from termindex.embedded import EmbeddedIndex
from termindex.embedded_format import FORMAT_VERSION, MANIFEST
from vsparta.demo import _drop_outdated_index


def test_index_in_an_older_format_is_removed_a_current_one_kept(tmp_path: Path) -> None:
    current, old = tmp_path / "current", tmp_path / "old"
    for path in (current, old):
        with EmbeddedIndex(path, create=True) as index:
            index.upsert([TermDocument("a", {1: 1.0})])
    manifest = json.loads((old / MANIFEST).read_text())
    (old / MANIFEST).write_text(json.dumps(manifest | {"version": FORMAT_VERSION - 1}))
    _drop_outdated_index(current)
    _drop_outdated_index(old)
    _drop_outdated_index(tmp_path / "missing")
    assert not old.exists()
    with EmbeddedIndex(current) as index:
        assert index.count() == 1
