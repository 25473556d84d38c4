"""Ids every service route reaches (24.4): the indexer refuses an id ending in a sub-resource.

``GET /images/{id}`` takes ids with "/", so ``a/file`` would be served as the file of ``a``: such
ids are refused where they enter the indexer (manifests, term documents) with the reason.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image

from vsparta.cli import main
from vsparta.core.ids import RESERVED_ID_SUFFIXES, routable_id
from vsparta.indexer.termdocs import TermDocError, iter_term_records


@pytest.mark.parametrize("suffix", RESERVED_ID_SUFFIXES)
def test_an_id_ending_in_a_route_is_refused_with_the_reason(suffix: str) -> None:
    with pytest.raises(ValueError) as caught:
        routable_id(f"photos/cat{suffix}", "m.jsonl:3")
    message = str(caught.value)
    assert message.startswith(f"m.jsonl:3: id 'photos/cat{suffix}' ends in '{suffix}': ")
    assert f"GET /images/{{id}}{suffix}" in message and "'photos/cat'" in message


@pytest.mark.parametrize("doc_id", ["file", "similar", "a/files", "a/file/b", "a/thumbnails", "a.file", "x/"])
def test_other_ids_pass(doc_id: str) -> None:
    assert routable_id(doc_id) == doc_id


@pytest.mark.parametrize(
    ("last_id", "message"),
    [
        ("cats/b/similar", "id 'cats/b/similar' ends in '/similar'"),
        ("cats/a", "duplicate document id 'cats/a'"),  # the manifest is read twice: checked, then streamed
    ],
)
def test_index_refuses_a_manifest_id_before_indexing_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], last_id: str, message: str
) -> None:
    images = tmp_path / "data"
    images.mkdir()
    for name, colour in [("a.png", (255, 0, 0)), ("b.png", (0, 0, 255))]:
        Image.new("RGB", (32, 32), colour).save(images / name)
    manifest = images / "manifest.jsonl"
    lines = [{"id": "cats/a", "image": "a.png"}, {"id": last_id, "image": "b.png"}]
    manifest.write_text("".join(json.dumps(x) + "\n" for x in lines))
    index = tmp_path / "index"
    rc = main(["index", str(manifest), "--fake-encoder", "--backend", f"embedded:{index}", "--workers", "0"])
    assert rc == 2
    err = capsys.readouterr().err  # the one-sentence form of every user mistake
    assert err.startswith("vsparta index: error: ") and err.count("\n") == 1, err
    assert message in err
    assert not (index / "manifest.json").exists()  # nothing written


def test_term_documents_refuse_such_an_id(tmp_path: Path) -> None:
    docs = tmp_path / "docs.jsonl"
    docs.write_text(json.dumps({"id": "red/thumbnail", "terms": {"red": 1.0}, "metadata": {}}) + "\n")
    with pytest.raises(TermDocError, match=r"docs.jsonl:1: id 'red/thumbnail' ends in '/thumbnail'"):
        list(iter_term_records(docs))
