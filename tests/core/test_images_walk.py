"""iter_image_files: recursive, case-insensitive, hidden things skipped, deterministic order."""

from __future__ import annotations

from pathlib import Path

import pytest

from vsparta.core.images import IMAGE_EXTENSIONS, iter_image_files


def test_extensions_contract() -> None:
    assert IMAGE_EXTENSIONS == {".jpg", ".jpeg", ".png", ".webp", ".gif", ".bmp"}


def test_walk_finds_images_sorted_and_skips_hidden(tmp_path: Path) -> None:
    names = [
        "b.png",
        "A.JPG",
        "sub/deeper/c.JpEg",
        "sub/d.webp",
        "sub/e.GIF",
        "z.bmp",
        "notes.txt",
        "sub/f.tiff",
        ".hidden.png",
        ".cache/g.png",
        "sub/.thumbs/h.jpg",
        "noext",
    ]
    for n in names:
        p = tmp_path / n
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"x")
    (tmp_path / "dir.png").mkdir()  # a folder named like an image is not a file
    found = iter_image_files(tmp_path)
    rel = [p.relative_to(tmp_path).as_posix() for p in found]
    assert rel == ["A.JPG", "b.png", "sub/d.webp", "sub/deeper/c.JpEg", "sub/e.GIF", "z.bmp"]
    assert iter_image_files(str(tmp_path)) == found  # str accepted, same order every time


def test_walk_rejects_a_non_directory(tmp_path: Path) -> None:
    f = tmp_path / "x.png"
    f.write_bytes(b"x")
    with pytest.raises(ValueError, match="not a directory"):
        iter_image_files(f)
