"""Fast pipeline tests with the colour-encoder fixture and the JSONL export as the only output."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from indexer.items import path_id, shard_of
from indexer.mapper import clean_terms, parse_top_n
from indexer.reader import detect_format, read_items
from indexer.runner import IndexConfig, run_index
from indexer.termdocs import TermDocExporter
from termindex import TermDocument


def _config(root: Path, out: Path, **kw) -> IndexConfig:
    kw.setdefault("workers", 0)
    kw.setdefault("batch_size", 4)
    kw.setdefault("progress", False)
    kw.setdefault("max_pixels", 200_000)  # conftest.MAX_PIXELS: makes bad/big.png too large
    return IndexConfig(input=root, export_jsonl=out, **kw)


def test_bad_files_are_reported_and_the_job_completes(
    image_folder: Path, tmp_path: Path, colour_encoder, bad_files, max_pixels, read_export
) -> None:
    failures = tmp_path / "failures.jsonl"
    out = tmp_path / "export"
    summary = run_index(
        _config(image_folder, out, failures=failures, max_pixels=max_pixels), encoder=colour_encoder
    )
    items = read_items(image_folder)
    assert summary.total == len(items) == 12 + len(bad_files)
    assert summary.failed == len(bad_files) and summary.indexed == 12 and summary.skipped == 0
    report = [json.loads(line) for line in failures.read_text().splitlines()]
    by_path = {Path(r["path"]).relative_to(image_folder).as_posix(): r for r in report}
    assert {k: r["reason"] for k, r in by_path.items()} == bad_files
    for rel, rec in by_path.items():
        assert rec["id"] == path_id(rel) and rec["message"]
    docs = read_export(out)
    assert len(docs) == 12
    for doc in docs.values():
        meta = doc["metadata"]
        assert doc["id"] == path_id(meta["image"])
        assert meta["image_root"] == str(image_folder.resolve())
        assert (Path(meta["image_root"]) / meta["image"]).is_file()
        assert doc["terms"] and all(k.startswith("tok") and v > 0 for k, v in doc["terms"].items())
    assert summary.failures_by_reason["too_large"] == 2


def test_worker_processes_give_the_same_documents(
    image_folder: Path, tmp_path: Path, colour_encoder, max_pixels, read_export
) -> None:
    a = run_index(_config(image_folder, tmp_path / "a", max_pixels=max_pixels), encoder=colour_encoder)
    b = run_index(
        _config(image_folder, tmp_path / "b", max_pixels=max_pixels, workers=2), encoder=colour_encoder
    )
    assert a.indexed == b.indexed == 12 and b.decoded == 12
    assert read_export(tmp_path / "a") == read_export(tmp_path / "b")


def test_shards_partition_the_input(image_folder: Path, tmp_path: Path, colour_encoder, read_export) -> None:
    out = tmp_path / "export"
    whole = run_index(_config(image_folder, tmp_path / "whole"), encoder=colour_encoder)
    parts = [
        run_index(_config(image_folder, out, shard=i, num_shards=3), encoder=colour_encoder) for i in range(3)
    ]
    assert sum(p.total for p in parts) == whole.total
    assert sum(p.indexed for p in parts) == whole.indexed == 12
    assert read_export(out) == read_export(tmp_path / "whole")
    assert len(list(out.glob("terms-S*.jsonl"))) == 3  # one numbered file per shard
    run_index(_config(image_folder, out), encoder=colour_encoder)  # unsharded rerun replaces them all
    assert [p.name for p in out.glob("terms-S*.jsonl")] == ["terms-S00000-00000.jsonl"]
    assert read_export(out) == read_export(tmp_path / "whole")


def test_term_document_round_trip_without_a_model(
    image_folder: Path, tmp_path: Path, colour_encoder, colour_tokenizer, read_export
) -> None:
    first = tmp_path / "first"
    run_index(_config(image_folder, first, export_docs_per_file=5), encoder=colour_encoder)
    assert len(list(first.glob("*.jsonl"))) == 3  # 12 docs, 5 per file
    assert detect_format(first) == "terms"
    second = tmp_path / "second"
    summary = run_index(_config(first, second, tokenizer=colour_tokenizer))
    assert summary.indexed == 12 and summary.failed == 0
    assert read_export(second) == read_export(first)


def test_rerun_without_resume_replaces_the_export(
    image_folder: Path, tmp_path: Path, colour_encoder, read_export
) -> None:
    out = tmp_path / "export"
    run_index(_config(image_folder, out), encoder=colour_encoder)
    again = run_index(_config(image_folder, out), encoder=colour_encoder)
    assert again.indexed == 12 and len(read_export(out)) == 12


def test_resume_from_export_skips_done_and_repairs_a_torn_line(
    image_folder: Path, tmp_path: Path, colour_encoder, read_export
) -> None:
    full = tmp_path / "full"
    run_index(_config(image_folder, full), encoder=colour_encoder)
    expected = read_export(full)
    # simulate a kill: keep 5 documents and half of the 6th line
    out = tmp_path / "out"
    out.mkdir()
    lines = (full / "terms-S00000-00000.jsonl").read_text().splitlines(keepends=True)
    (out / "terms-S00000-00000.jsonl").write_text("".join(lines[:5]) + lines[5][:40])
    summary = run_index(_config(image_folder, out, resume=True), encoder=colour_encoder)
    assert summary.skipped == 5 and summary.indexed == 7
    assert read_export(out) == expected


def test_exporter_numbering_and_shard_names(tmp_path: Path) -> None:
    ex = TermDocExporter(tmp_path, lambda i: f"t{i}", shard=2, docs_per_file=2)
    ex.write([TermDocument(str(i), {i: 1.0 + i}) for i in range(5)])
    ex.close()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["terms-S00002-00000.jsonl", "terms-S00002-00001.jsonl", "terms-S00002-00002.jsonl"]


def test_ids_and_shards_are_stable() -> None:
    assert path_id("a/b.jpg") == path_id(Path("a") / "b.jpg") == hashlib.sha1(b"a/b.jpg").hexdigest()
    counts = [0, 0, 0, 0]
    for i in range(400):
        counts[shard_of(f"id{i}", 4)] += 1
    assert all(60 < c < 140 for c in counts)
    assert shard_of("id7", 4) == shard_of("id7", 4)


def test_top_n_parsing_and_cleaning() -> None:
    assert parse_top_n("all") is None and parse_top_n("7") == 7
    with pytest.raises(ValueError, match="top-n"):
        parse_top_n("0")
    assert clean_terms({1: 0.5, 2: -1.0, 3: 0.0, 4: 2.0, 5: float("nan"), 6: 0.5}, 2) == {4: 2.0, 1: 0.5}


def test_bad_options_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="nothing to write"):
        IndexConfig(input=tmp_path).validate()
    with pytest.raises(ValueError, match="--shard"):
        IndexConfig(input=tmp_path, export_jsonl=tmp_path, shard=2, num_shards=2).validate()
    with pytest.raises(ValueError, match="batch-size"):
        IndexConfig(input=tmp_path, export_jsonl=tmp_path, batch_size=0).validate()


def test_progress_logs_lines_when_not_on_a_terminal(caplog: pytest.LogCaptureFixture) -> None:
    from indexer.progress import Progress

    progress = Progress(10, enabled=None, log_every=0.0)  # pytest's stderr is not a terminal
    with caplog.at_level("INFO", logger="indexer.progress"):
        progress.update(4)
    progress.close()
    assert not progress.bar_shown and progress.done == 4
    assert any(
        "4/10 images" in r.message and "images/s" in r.message and "ETA" in r.message for r in caplog.records
    )


def test_engine_errors_stop_the_job_with_the_engine_error(
    image_folder: Path, tmp_path: Path, colour_encoder
) -> None:
    """A writer-thread failure surfaces in the caller with its type; nothing hangs."""
    from termindex import InvalidDocument, open_index

    index = open_index(
        f"embedded:{tmp_path / 'small-vocab'}", create=True, vocab_size=50
    )  # colour ids reach 299
    config = IndexConfig(input=image_folder, backend="unused", workers=0, batch_size=2, progress=False)
    with pytest.raises(InvalidDocument, match="vocab_size"):
        run_index(config, encoder=colour_encoder, index=index)
    index.close()


def test_cli_unreachable_engine_is_a_clear_error(
    image_folder: Path, tiny_model: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from vsparta.cli import main

    rc = main(["index", str(image_folder), "--model", str(tiny_model), "--backend", "http://127.0.0.1:9/x"])
    assert rc == 1
    assert "could not be written" in caplog.text
