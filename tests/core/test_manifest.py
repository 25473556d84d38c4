from __future__ import annotations

from pathlib import Path

import pytest

from vsparta.core.manifest import ManifestError, ManifestRecord, read_manifest, write_manifest


def test_round_trip_keeps_relative_paths(tmp_path: Path) -> None:
    recs = [
        ManifestRecord("a", tmp_path / "img" / "a.png", ["a red cube"], {"split": "test"}),
        ManifestRecord("b/ü 1", tmp_path / "img" / "b.jpg", [], {}, tmp_path / "r" / "b.npz"),
    ]
    path = write_manifest(tmp_path / "m.jsonl", recs)
    assert '"image": "img/a.png"' in path.read_text()
    back = read_manifest(path)
    assert [r.id for r in back] == ["a", "b/ü 1"]
    assert back[0].image == (tmp_path / "img" / "a.png").resolve()
    assert back[1].regions == (tmp_path / "r" / "b.npz").resolve()
    assert back[0].captions == ["a red cube"] and back[0].metadata == {"split": "test"}


@pytest.mark.parametrize(
    "line, message",
    [
        ("{not json", "not valid JSON"),
        ('{"image": "x.png"}', "'id'"),
        ('{"id": "a"}', "'image'"),
        ('{"id": "a", "image": "x", "captions": "one"}', "'captions'"),
    ],
)
def test_malformed_lines_name_file_and_line(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text('{"id": "ok", "image": "x.png"}\n\n' + line + "\n")
    with pytest.raises(ManifestError, match=message) as exc:
        read_manifest(path)
    assert "m.jsonl:3" in str(exc.value)


def test_duplicate_ids_rejected(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text('{"id": "a", "image": "1.png"}\n{"id": "a", "image": "2.png"}\n')
    with pytest.raises(ManifestError, match="duplicate id"):
        read_manifest(path)


def test_relative_paths_resolve_against_the_manifest_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    rec = ManifestRecord("a", Path("out/images/a.png"), ["x"])
    path = write_manifest(Path("out/m.jsonl"), [rec])
    assert '"image": "images/a.png"' in path.read_text()
    assert read_manifest(path)[0].image == (tmp_path / "out" / "images" / "a.png").resolve()
