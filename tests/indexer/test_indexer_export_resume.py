"""The JSONL export at scale. A resumed job reads each line's id and metadata without parsing its
terms (the same answer as parsing the whole line, for every line a writer or a person could have put
there) and rewrites only the parts it must; a re-index checks its whole input, then streams it;
weights are written in 9 digits and read back as the same float32."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vsparta.indexer.batch import TermBatch, csr_from_dicts
from vsparta.indexer.items import stamp
from vsparta.indexer.reader import iter_items
from vsparta.indexer.runner import IndexConfig, run_index
from vsparta.indexer.termdocs import TermDocExporter

VERSION = {"file_version": "10:1"}

# (id, terms, metadata) that look like the structure the fast read relies on
TRICKY = [
    ("plain", {"a": 1.0}, {"path": "x.jpg"}),
    ('quo"te', {"metadata": 2.0, "b": 1.0}, {"path": 'a, "metadata": {"p": 1}}'}),
    ("back\\slash", {"c": 0.5}, {"nested": {"x": 1, "metadata": {"y": 2}}}),
    ("ünï cödé 🐕", {"🐕": 1.0}, {"path": "ü/🐕.jpg", **VERSION}),
    ("no-metadata", {"d": 1.0}, None),
    ("empty-terms", {}, {"a": [1, 2, {"metadata": 3}]}),
    ("last-nested", {"e": 1.0}, {"a": 1, "metadata": {"b": 2}}),
]


def _lines() -> list[str]:
    out = []
    for doc_id, terms, metadata in TRICKY:
        record = {"id": doc_id, "terms": terms}
        if metadata is not None:
            record["metadata"] = metadata
        out.append(json.dumps(record, ensure_ascii=False))
    # written by hand: other key orders and spacing, parsed whole
    out.append('{"metadata": {"path": "m.jpg"}, "id": "meta-first", "terms": {"f": 1}}')
    out.append('{ "id" : "spaced", "terms" : {"g": 1}, "metadata" : {"path": "s.jpg"} }')
    out.append('{"id": "trailing-space", "terms": {"h": 1}, "metadata": {"path": "t.jpg"}}   ')
    return out


def _expected(lines: list[str]) -> dict[str, bytes]:
    records = [json.loads(line) for line in lines]
    return {r["id"]: stamp(r.get("metadata") or {}) for r in records}


def test_resume_reads_the_same_ids_and_metadata_as_parsing_each_line(tmp_path: Path) -> None:
    lines = _lines()
    (tmp_path / "terms-S00000-00000.jsonl").write_text("\n".join(lines) + "\n", "utf-8")
    exporter = TermDocExporter(tmp_path, str, resume=True)
    assert exporter.stamps == _expected(lines)
    assert len(exporter.stamps) == len(TRICKY) + 3


def test_a_document_written_again_leaves_exactly_its_old_line(tmp_path: Path) -> None:
    lines = _lines()
    part = tmp_path / "terms-S00000-00000.jsonl"
    part.write_text("\n".join(lines) + "\n", "utf-8")
    exporter = TermDocExporter(tmp_path, lambda i: f"t{i}", resume=True)
    again = ['quo"te', "ünï cödé 🐕", "spaced"]
    exporter.write(TermBatch(again, *csr_from_dicts([{1: 1.0}] * 3), [{"path": "new"}] * 3))
    exporter.close()
    kept = [json.loads(line)["id"] for line in part.read_text("utf-8").splitlines()]
    assert kept == [json.loads(line)["id"] for line in lines if json.loads(line)["id"] not in again]
    new = (tmp_path / "terms-S00000-00001.jsonl").read_text("utf-8").splitlines()
    assert [json.loads(line)["id"] for line in new] == again
    resumed = TermDocExporter(tmp_path, str, resume=True)
    assert {i: resumed.stamps[i] for i in again} == {i: stamp({"path": "new"}) for i in again}


def _export(folder: Path, ids: list[str], per_file: int) -> None:
    exporter = TermDocExporter(folder, lambda i: f"tok{i}", docs_per_file=per_file)
    exporter.write(TermBatch(ids, *csr_from_dicts([{1: 1.0}] * len(ids)), [{"path": i} for i in ids]))
    exporter.close()


def _inodes(folder: Path) -> dict[str, int]:
    return {p.name: p.stat().st_ino for p in folder.iterdir()}


def test_only_the_parts_that_held_a_changed_or_pruned_document_are_rewritten(tmp_path: Path) -> None:
    ids = [f"doc-{i}" for i in range(9)]
    _export(tmp_path, ids, per_file=3)  # parts 0, 1, 2
    before = _inodes(tmp_path)
    exporter = TermDocExporter(tmp_path, lambda i: f"t{i}", docs_per_file=3, resume=True)
    exporter.write(TermBatch(["doc-4"], *csr_from_dicts([{2: 1.0}]), [{"path": "changed"}]))
    exporter.close()
    after = _inodes(tmp_path)
    assert after["terms-S00000-00000.jsonl"] == before["terms-S00000-00000.jsonl"]
    assert after["terms-S00000-00002.jsonl"] == before["terms-S00000-00002.jsonl"]
    assert after["terms-S00000-00001.jsonl"] != before["terms-S00000-00001.jsonl"]
    part1 = (tmp_path / "terms-S00000-00001.jsonl").read_text().splitlines()
    assert [json.loads(line)["id"] for line in part1] == ["doc-3", "doc-5"]

    exporter = TermDocExporter(tmp_path, lambda i: f"t{i}", docs_per_file=3, resume=True)
    before = _inodes(tmp_path)
    exporter.remove({"doc-7", "doc-4"})  # doc-4's line is now in part 3
    after = _inodes(tmp_path)
    assert {name for name in after if after[name] != before[name]} == {
        "terms-S00000-00002.jsonl",
        "terms-S00000-00003.jsonl",
    }
    lines = [json.loads(line)["id"] for p in tmp_path.iterdir() for line in p.read_text().splitlines()]
    assert sorted(lines) == sorted(set(ids) - {"doc-7", "doc-4"})


@pytest.mark.parametrize("resume", [True, False])
def test_a_rewrite_killed_before_its_rename_leaves_no_file_behind(tmp_path: Path, resume: bool) -> None:
    _export(tmp_path, [f"doc-{i}" for i in range(4)], per_file=2)
    part = (tmp_path / "terms-S00000-00001.jsonl").read_bytes()
    (tmp_path / "terms-S00000-00001.jsonl.tmp").write_bytes(part[: len(part) // 2])  # killed mid-copy
    (tmp_path / "terms-S00001-00000.jsonl.tmp").write_bytes(b"{")  # another shard's job, still running
    exporter = TermDocExporter(tmp_path, str, docs_per_file=2, shard=0, num_shards=2, resume=resume)
    exporter.close()
    names = sorted(p.name for p in tmp_path.iterdir())
    kept = ["terms-S00000-00000.jsonl", "terms-S00000-00001.jsonl"] if resume else []
    assert names == [*kept, "terms-S00001-00000.jsonl.tmp"]
    if resume:
        assert sorted(exporter.stamps) == [f"doc-{i}" for i in range(4)]
    TermDocExporter(tmp_path, str).close()  # a fresh unsharded job replaces every shard's export
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("last_line", "error"),
    [
        ('{"id": "doc-0", "terms": {"tok1": 1.0}}', "duplicate document id 'doc-0'"),
        ('{"id": "doc-9", "terms": {"tok1": "heavy"}}', "terms"),
        ('{"id": "doc-9", "terms": {"tok1": 1.0}', "00002.jsonl:1: not valid JSON"),
    ],
)
def test_reindexing_an_export_checks_every_line_before_writing_anything(
    tmp_path: Path, colour_tokenizer: Path, last_line: str, error: str
) -> None:
    """Term documents are read twice (checked, then streamed): a bad last line still stops the job
    before its first document is written."""
    export = tmp_path / "export"
    _export(export, [f"doc-{i}" for i in range(6)], per_file=3)
    (export / "terms-S00000-00002.jsonl").write_text(last_line + "\n")
    with pytest.raises(ValueError, match=error):
        iter_items(export)
    target = tmp_path / "again"
    config = IndexConfig(input=export, export_jsonl=target, tokenizer=colour_tokenizer, progress=False)
    with pytest.raises(ValueError, match=error):
        run_index(config)
    assert not target.exists() or not list(target.glob("*.jsonl"))


def test_reindexing_an_export_streams_its_documents_in_order(tmp_path: Path, colour_tokenizer: Path) -> None:
    export = tmp_path / "export"
    ids = [f"doc-{i}" for i in range(7)]
    _export(export, ids, per_file=3)
    items = iter_items(export)
    assert not isinstance(items, list)
    assert [it.id for it in items] == ids
    target = tmp_path / "again"
    config = IndexConfig(input=export, export_jsonl=target, tokenizer=colour_tokenizer, progress=False)
    assert run_index(config).indexed == 7


@pytest.mark.parametrize(
    "weight", ["true", '"1.5"', "null", "NaN", "Infinity", "-Infinity", "1e999", "1" + "0" * 400]
)
def test_a_weight_that_is_not_a_finite_number_is_named(tmp_path: Path, weight: str) -> None:
    from vsparta.indexer.termdocs import TermDocError, iter_term_records

    docs = tmp_path / "docs.jsonl"
    docs.write_text(
        '{"id": "a", "terms": {"x": 1, "y": 2.5}}\n'
        + f'{{"id": "b", "terms": {{"x": 1, "bad": {weight}}}}}\n'
    )
    with pytest.raises(TermDocError, match=r"docs.jsonl:2: weight of 'bad' must be a finite number"):
        list(iter_term_records(docs))


def test_tokens_map_to_ids_in_order_and_two_spellings_of_one_id_add_up() -> None:
    from vsparta.indexer.termdocs import TermDocError, terms_from_tokens

    vocab = {"red": 3, "cube": 7, "RED": 3}.get
    assert terms_from_tokens({"cube": 2, "red": 1.5}, vocab, "x") == ([7, 3], [2.0, 1.5])
    assert terms_from_tokens({"red": 1.0, "cube": 2.0, "RED": 0.5}, vocab, "x") == ([3, 7], [1.5, 2.0])
    with pytest.raises(TermDocError, match=r"^doc-1: token 'ball' is not in the tokenizer's vocabulary$"):
        terms_from_tokens({"red": 1.0, "ball": 1.0, "cone": 1.0}, vocab, "doc-1")


def test_a_document_with_an_unknown_token_fails_alone_and_the_others_keep_their_terms(
    tmp_path: Path, colour_tokenizer: Path, read_export
) -> None:
    export = tmp_path / "export"
    export.mkdir()
    lines = [
        {"id": "a", "terms": {"tok1": 0.5, "tok3": 2.0, "tok2": 2.0}, "metadata": {"n": 1}},
        {"id": "b", "terms": {"tok1": 1.0, "no-such-token": 1.0}, "metadata": {}},
        {"id": "c", "terms": {"tok4": 1.0, "tok5": -1.0}, "metadata": {}},
    ]
    (export / "terms.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    target = tmp_path / "again"
    config = IndexConfig(input=export, export_jsonl=target, tokenizer=colour_tokenizer, progress=False)
    summary = run_index(config)
    assert (summary.indexed, summary.failed) == (2, 1)
    assert summary.failures_by_reason == {"unknown_token": 1}
    again = read_export(target)
    assert list(again["a"]["terms"].items()) == [("tok2", 2.0), ("tok3", 2.0), ("tok1", 0.5)]  # ties by id
    assert again["a"]["metadata"] == {"n": 1}
    assert again["c"]["terms"] == {"tok4": 1.0}  # a weight that is not positive is left out


def test_exported_weights_read_back_as_the_same_float32_and_tokens_as_written(tmp_path: Path) -> None:
    import numpy as np

    from vsparta.indexer.termdocs import iter_term_records

    rng = np.random.default_rng(0)
    bits = rng.integers(1, 0x7F800000, size=20_000, dtype=np.uint32)  # every positive finite float32
    special = np.array([1.0, 2.0, 0.1, 1 / 3, 3.4028235e38, 1.1754944e-38, 1e-45, 4.0 / 3], dtype=np.float32)
    weights = np.concatenate([bits.view(np.float32), special])
    per_doc = 100
    docs = len(weights) // per_doc
    weights = weights[: docs * per_doc]
    names = ['quo"te', "back\\slash", "ünï 🐕", "tab\there", "[fake7]", "##s"]
    token = {i: names[i % len(names)] + str(i) for i in range(per_doc)}
    term_ids = np.tile(np.arange(per_doc, dtype=np.int32), docs)
    indptr = np.arange(docs + 1, dtype=np.int64) * per_doc
    exporter = TermDocExporter(tmp_path, token.__getitem__)
    exporter.write(
        TermBatch([f"d{i}" for i in range(docs)], indptr, term_ids, weights, [{"i": i} for i in range(docs)])
    )
    exporter.close()
    records = list(iter_term_records(tmp_path))
    assert [r["id"] for r in records] == [f"d{i}" for i in range(docs)]
    assert [r["metadata"] for r in records] == [{"i": i} for i in range(docs)]
    assert all(list(r["terms"]) == [token[i] for i in range(per_doc)] for r in records)
    back = np.array([w for r in records for w in r["terms"].values()], dtype=np.float32)
    assert np.array_equal(back.view(np.uint32), weights.view(np.uint32))
    resumed = TermDocExporter(tmp_path, token.__getitem__, resume=True)  # the fast read takes every line
    assert resumed.stamps == {f"d{i}": stamp({"i": i}) for i in range(docs)}
