"""Fast pipeline tests with the colour-encoder fixture and the JSONL export as the only output."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from vsparta.indexer.batch import TermBatch, canonical_csr, csr_from_dicts
from vsparta.indexer.items import path_id, shard_of
from vsparta.indexer.mapper import parse_top_n
from vsparta.indexer.reader import detect_format, read_items
from vsparta.indexer.runner import IndexConfig, IndexSummary, run_index
from vsparta.indexer.termdocs import TermDocExporter
from vsparta.termindex.base import heaviest_terms


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
    ex.write(
        TermBatch([str(i) for i in range(5)], *csr_from_dicts([{i: 1.0 + i} for i in range(5)]), [{}] * 5)
    )
    ex.close()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["terms-S00002-00000.jsonl", "terms-S00002-00001.jsonl", "terms-S00002-00002.jsonl"]


def test_ids_and_shards_are_stable() -> None:
    assert path_id("a/b.jpg") == path_id(Path("a") / "b.jpg") == hashlib.sha1(b"a/b.jpg").hexdigest()
    counts = [0, 0, 0, 0]
    for i in range(400):
        counts[shard_of(f"id{i}", 4)] += 1
    assert all(60 < c < 140 for c in counts)


def test_shards_agree_across_processes_and_hash_seeds() -> None:
    """N jobs on N machines must split the input the same way: no dependence on hash()."""
    import os
    import subprocess
    import sys

    ids = [f"id{i}" for i in range(200)] + ["é/ü.jpg", path_id("a/b.jpg")]
    here = [shard_of(i, 7) for i in ids]
    code = (
        "import json, sys; from indexer.items import shard_of;"
        " print(json.dumps([shard_of(i, 7) for i in json.load(sys.stdin)]))"
    )
    for seed in ("0", "1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        proc = subprocess.run(
            [sys.executable, "-c", code],
            input=json.dumps(ids),
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
        assert json.loads(proc.stdout) == here
    assert here[:5] == [int.from_bytes(hashlib.sha1(i.encode()).digest()[:8], "big") % 7 for i in ids[:5]]


def test_top_n_parsing_and_cleaning() -> None:
    assert parse_top_n("all") is None and parse_top_n("7") == 7
    with pytest.raises(ValueError, match="top-n"):
        parse_top_n("0")
    raw = {1: 0.5, 2: -1.0, 3: 0.0, 4: 2.0, 5: float("nan"), 6: 0.5, 7: float("inf")}
    ids, weights = np.array(list(raw), dtype=np.int32), np.array(list(raw.values()), dtype=np.float32)
    indptr, ids, weights = canonical_csr(np.array([0, len(ids)]), ids, weights, 2)
    assert indptr.tolist() == [0, 2] and ids.tolist() == [4, 1] and weights.tolist() == [2.0, 0.5]


def test_min_weight_leaves_out_light_terms_but_never_a_whole_image() -> None:
    indptr = np.array([0, 4, 6, 6, 9])  # the third image has no terms at all
    ids = np.array([10, 11, 12, 13, 20, 21, 30, 31, 32], dtype=np.int32)
    weights = np.array([0.2, 3.0, 0.6, 0.5, 0.1, 0.3, 0.5, 4.0, 0.49], dtype=np.float32)
    out = canonical_csr(indptr, ids, weights, None, min_weight=0.5)
    rows = [out[1][a:b].tolist() for a, b in zip(out[0][:-1], out[0][1:], strict=True)]
    # >= 0.5 kept, heaviest first; the second image has nothing >= 0.5: its heaviest (0.3) stays
    assert rows == [[11, 12, 13], [21], [], [31, 30]]
    capped = canonical_csr(indptr, ids, weights, 1, min_weight=0.5)
    assert capped[0].tolist() == [0, 1, 2, 2, 3] and capped[1].tolist() == [11, 21, 31]
    same = canonical_csr(indptr, ids, weights, None, min_weight=0.0)
    assert np.diff(same[0]).tolist() == [4, 2, 0, 3]  # 0: every positive term, as before


def test_array_term_order_is_heaviest_terms() -> None:
    """canonical_csr is the array form of termindex.base.heaviest_terms: same rows, ties by id."""
    rng = np.random.default_rng(3)
    rows = [
        {
            int(t): float(rng.choice([0.25, 0.5, 1.0, 2.0]))
            for t in rng.choice(500, size=int(n), replace=False)
        }
        for n in rng.integers(0, 40, size=30)
    ]
    indptr = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum([len(r) for r in rows], out=indptr[1:])
    ids = np.array([t for r in rows for t in r], dtype=np.int32)  # insertion order: unsorted
    weights = np.array([w for r in rows for w in r.values()], dtype=np.float32)
    for top_n in (None, 5):
        out = TermBatch(
            [str(i) for i in range(len(rows))], *canonical_csr(indptr, ids, weights, top_n), [{}] * 30
        )
        for i, row in enumerate(rows):
            got_ids, got_w = out.row(i)
            assert list(zip(got_ids.tolist(), got_w.tolist(), strict=True)) == heaviest_terms(row, top_n)


def test_summary_never_shows_nan() -> None:
    """A rerun with everything skipped has no stage figures: they are left out, not NaN."""
    s = IndexSummary(total=5, skipped=5, seconds=0.2)
    text = "\n".join(s.lines())
    assert "nan" not in text.lower() and "skipped (resume) 5" in text
    assert s.stage_rates() == {"decode": None, "encode": None, "write": None}
    busy = IndexSummary(total=4, indexed=4, decoded=4, decode_seconds=0.5, decode_workers=2, seconds=1.0)
    assert busy.busy_shares()["decode"] == 0.25 and "decode 8.0/s per worker x2 (busy 25%)" in busy.lines()[1]


def test_bad_options_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="nothing to write"):
        IndexConfig(input=tmp_path).validate()
    with pytest.raises(ValueError, match="--shard"):
        IndexConfig(input=tmp_path, export_jsonl=tmp_path, shard=2, num_shards=2).validate()
    with pytest.raises(ValueError, match="batch-size"):
        IndexConfig(input=tmp_path, export_jsonl=tmp_path, batch_size=0).validate()


def test_progress_logs_lines_when_not_on_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    from vsparta.indexer.progress import Progress

    progress = Progress(10, enabled=None, log_every=0.0)  # pytest's stderr is not a terminal
    progress.update(4)
    progress.close()
    err = capsys.readouterr().err
    assert progress.done == 4 and "4/10 img" in err and "\r" not in err


def test_engine_errors_stop_the_job_with_the_engine_error(
    image_folder: Path, tmp_path: Path, colour_encoder
) -> None:
    """A writer-thread failure surfaces in the caller with its type; nothing hangs."""
    from vsparta.termindex import InvalidDocument, open_index

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

    rc = main(
        ["index", str(image_folder), "--fake-encoder", "--backend", "http://127.0.0.1:9/x", "--workers", "0"]
    )
    assert rc == 3  # an unreachable engine: 3, as `vsparta search` (docs/architecture.md section 3)
    assert "could not be written" in caplog.text and "not reachable" in caplog.text


def test_cli_bad_model_is_one_sentence_and_leaves_no_index(
    image_folder: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    from vsparta.cli import main

    target = tmp_path / "index"
    rc = main(
        ["index", str(image_folder), "--model", str(tmp_path / "missing"), "--backend", f"embedded:{target}"]
    )
    assert rc == 2
    said = caplog.text + capsys.readouterr().err
    assert f"--model {tmp_path / 'missing'}" in said and "no such" in said and "Traceback" not in said
    assert not target.exists()


def test_progress_off_and_redirected_write_no_carriage_returns(capsys: pytest.CaptureFixture[str]) -> None:
    from vsparta.indexer.progress import Progress

    for enabled in (None, True, False):
        bar = Progress(10, enabled=enabled, log_every=0.0)
        bar.update(10)
        bar.close()
        err = capsys.readouterr().err
        assert "\r" not in err
        assert ("10/10" in err) is (enabled is not False)  # --no-progress: nothing at all


def test_index_help_is_plain_text_with_help_for_every_option(capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    from vsparta.cli import main
    from vsparta.indexer.cli import add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert [a.dest for a in parser._actions if not a.help] == []
    with pytest.raises(SystemExit):
        main(["index", "--help"])
    text = capsys.readouterr().out
    assert "::" not in text and "``" not in text
    assert "symlink_outside" in text and "broken_symlink" in text and "--follow-symlinks" in text


def test_one_jsonl_rule_for_manifests_and_term_documents(tmp_path: Path) -> None:
    """A half-written last line (no newline, not JSON) is skipped by both readers; a bad line
    anywhere else is an error naming the file and line, in both."""
    from vsparta.core.manifest import ManifestError, read_manifest
    from vsparta.indexer.termdocs import TermDocError, iter_term_records

    manifest, terms = tmp_path / "m.jsonl", tmp_path / "t.jsonl"
    manifest.write_text('{"id": "a", "image": "a.png"}\n{"id": "b", "ima')
    terms.write_text('{"id": "a", "terms": {"x": 1.0}}\n{"id": "b", "ter')
    assert [r.id for r in read_manifest(manifest)] == ["a"]
    assert [r["id"] for r in iter_term_records(terms)] == ["a"]
    manifest.write_text('{"id": "a", "ima\n{"id": "b", "image": "b.png"}\n')
    terms.write_text('{"id": "a", "ter\n{"id": "b", "terms": {"x": 1.0}}\n')
    with pytest.raises(ManifestError, match="m.jsonl:1"):
        read_manifest(manifest)
    with pytest.raises(TermDocError, match="t.jsonl:1"):
        list(iter_term_records(terms))
