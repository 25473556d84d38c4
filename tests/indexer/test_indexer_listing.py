"""The input listing is streamed (issue 24): a folder is walked as the job goes, in exactly the
order the old whole-list sort gave, so ids, shards and --resume are what they were; progress
counts the files found so far until the walk ends."""

from __future__ import annotations

import functools
import io
import os
import signal
from pathlib import Path

import pytest
from test_indexer_signals import SignalDuringEncode

from vsparta.core.images import IMAGE_EXTENSIONS, iter_image_files
from vsparta.indexer import runner
from vsparta.indexer.items import path_id, shard_of
from vsparta.indexer.progress import Progress
from vsparta.indexer.reader import iter_items, read_items
from vsparta.indexer.runner import IndexConfig, run_index


def _listing_as_it_was(root: Path) -> list[Path]:
    """The listing before issue 24: os.walk everything, then one sort of whole relative paths."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        for fname in filenames:
            if fname.startswith(".") or Path(fname).suffix.lower() not in IMAGE_EXTENSIONS:
                continue
            path = Path(dirpath) / fname
            if path.is_file() or path.is_symlink():
                found.append((path.relative_to(root).as_posix(), path))
    found.sort(key=lambda item: item[0])
    return [p for _, p in found]


# Names where sorting per folder by plain name would differ from sorting whole paths:
# "-" (0x2d) and "." (0x2e) sort before "/" (0x2f), " " and "0" around them, and case.
TRICKY = [
    "a.jpg", "a-b.jpg", "a/x.jpg", "a/y/z.png", "a b/c.gif", "a0.jpg", "ab.jpg", "A/q.JPG",
    "a.b/r.jpg", "a.b.jpg", "é/s.webp", "e.jpg", "Z.bmp", "deep/1/2/3/4/t.jpeg", "deep/1.jpg",
    "deep/1-0/u.jpg", ".hidden/v.jpg", "sub/.w.jpg", "notes.txt", "x.tiff",
]  # fmt: skip


def _tricky_tree(root: Path) -> None:
    for rel in TRICKY:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x")
    (root / "folder.png").mkdir()  # a folder with an image's name is not listed
    (root / "link.jpg").symlink_to(root / "a.jpg")  # a link inside: listed
    (root / "dead.jpg").symlink_to(root / "missing.jpg")  # dangling: listed, reported later
    (root / "linked-dir").symlink_to(root / "a", target_is_directory=True)  # not entered
    (root / "linked-dir.jpg").symlink_to(root / "a", target_is_directory=True)  # a folder: no


def test_walk_lists_exactly_what_the_old_sorted_listing_did(tmp_path: Path) -> None:
    root = tmp_path / "images"
    _tricky_tree(root)
    expected = _listing_as_it_was(root)
    assert iter_image_files(root, include_symlinks=True) == expected
    rels = [p.relative_to(root).as_posix() for p in expected]
    assert rels[:4] == ["A/q.JPG", "Z.bmp", "a b/c.gif", "a-b.jpg"]  # whole-path order, not per name
    assert rels.index("a.jpg") < rels.index("a/x.jpg") < rels.index("a0.jpg")
    items = read_items(root)
    assert [it.location for it in items] == [str(p) for p in expected]
    assert [it.id for it in items] == [path_id(r) for r in rels]
    assert {it.id: it.rejected[0] for it in items if it.rejected} == {path_id("dead.jpg"): "broken_symlink"}


def test_region_folder_walk_keeps_the_sorted_rglob_order(tmp_path: Path) -> None:
    root = tmp_path / "regions"
    for rel in ["a.npz", "a-b.npz", "a/x.npz", "a/y/z.npz", "a b/c.npz", ".h/d.npz", "e.NPZ", "f.npz.txt"]:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x")
    expected = sorted(root.rglob("*.npz"))
    items = list(iter_items(root, "regions"))
    assert [it.regions for it in items] == expected
    assert [it.location for it in items] == [str(p) for p in expected]


def test_the_folder_is_walked_as_items_are_taken(tmp_path: Path) -> None:
    """Lazy: a file added to a folder the walk has not reached yet is still listed."""
    root = tmp_path / "images"
    for d in ("d1", "d2"):
        (root / d).mkdir(parents=True)
        (root / d / "a.jpg").write_bytes(b"x")
    items = iter_items(root, "images")
    first = next(items)
    assert first.metadata["image"] == "d1/a.jpg"
    (root / "d2" / "b.jpg").write_bytes(b"x")
    assert [it.metadata["image"] for it in items] == ["d2/a.jpg", "d2/b.jpg"]


def test_a_missing_folder_is_refused_before_any_walk(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not a directory"):
        iter_items(tmp_path / "nope", "images")  # raised at the call, not at the first item


@pytest.fixture
def many_folders(tmp_path: Path, write_images) -> Path:
    """48 small images in 6 folders: more than the decoder's first chunks, so the walk is unfinished
    when an early batch is encoded."""
    root = tmp_path / "many"
    for d in range(6):
        write_images(root / f"d{d}", n=8, size=16)
    return root


def _config(root: Path, out: Path, **kw) -> IndexConfig:
    kw.setdefault("progress", False)
    return IndexConfig(input=root, export_jsonl=out, workers=0, batch_size=3, **kw)


def test_shards_partition_the_streamed_input(many_folders: Path, tmp_path: Path, colour_encoder, read_export):
    run_index(_config(many_folders, tmp_path / "all"), encoder=colour_encoder)
    full = read_export(tmp_path / "all")
    parts = []
    for shard in range(3):
        out = tmp_path / f"shard{shard}"
        summary = run_index(_config(many_folders, out, shard=shard, num_shards=3), encoder=colour_encoder)
        docs = read_export(out)
        assert summary.total == len(docs) and summary.listing_complete
        assert all(shard_of(doc_id, 3) == shard for doc_id in docs)
        parts.append(docs)
    assert sum(len(p) for p in parts) == len(full) == 48  # disjoint, and nothing left out
    assert {k: v for p in parts for k, v in p.items()} == full  # the same documents


def test_resume_after_a_stop_mid_walk_loses_and_duplicates_nothing(
    many_folders: Path, tmp_path: Path, colour_encoder, read_export
) -> None:
    run_index(_config(many_folders, tmp_path / "full"), encoder=colour_encoder)
    full = read_export(tmp_path / "full")
    out = tmp_path / "out"
    stopped = run_index(
        _config(many_folders, out), encoder=SignalDuringEncode(colour_encoder, signal.SIGTERM, at=2)
    )
    assert stopped.interrupted_by == "SIGTERM" and stopped.indexed == 6
    assert not stopped.listing_complete and stopped.total < 48  # stopped before the walk ended
    assert f"of {stopped.total} listed so far" in stopped.lines()[0]
    resumed = run_index(_config(many_folders, out, resume=True), encoder=colour_encoder)
    assert resumed.skipped == 6 and resumed.indexed == 42 and resumed.total == 48
    lines = [line for f in sorted(out.glob("*.jsonl")) for line in f.read_text().splitlines()]
    assert len(lines) == 48  # no document written twice
    assert read_export(out) == full


def test_progress_says_found_so_far_until_the_walk_ends() -> None:
    stream = io.StringIO()
    bar = Progress(None, enabled=True, log_every=0.0, stream=stream)
    bar.found(1)
    bar.found(1500)
    bar.update(2)
    assert stream.getvalue().splitlines()[-1].startswith("2/1500 img")
    assert "listing: 1,500 found so far" in stream.getvalue().splitlines()[-1]
    bar.listing_done(2000)
    bar.update(1)
    bar.close()
    last = stream.getvalue().splitlines()[-1]
    assert last.startswith("3/2000 img") and "found so far" not in last and "\r" not in stream.getvalue()


def test_a_job_reports_progress_while_still_listing(
    many_folders: Path,
    tmp_path: Path,
    colour_encoder,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(runner, "Progress", functools.partial(Progress, log_every=0.0))  # a line per update
    config = _config(many_folders, tmp_path / "out", progress=True)
    summary = run_index(config, encoder=colour_encoder)
    lines = [line for line in capsys.readouterr().err.splitlines() if " img" in line]
    assert "found so far" in lines[0]  # the first batches were written before the walk ended
    assert lines[-1].startswith("48/48 img") and "found so far" not in lines[-1]
    assert summary.total == 48 and summary.listing_complete
