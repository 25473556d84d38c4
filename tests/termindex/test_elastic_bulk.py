"""Writes from arrays, several bulk connections, load settings, force-merge, new versions through
the CLI, and a backend that answers HTTP but is not Elasticsearch."""

from __future__ import annotations

import argparse
import asyncio
import http.server
import threading
from collections.abc import Iterator

import numpy as np
import pytest
from elastic_testkit import fresh_index, random_docs, tokenizer_folder, unique_name

from vsparta.termindex import open_index
from vsparta.termindex.base import TermDocument
from vsparta.termindex.elastic.bulk import BulkOptions, chunks
from vsparta.termindex.elastic.index import ElasticsearchIndex
from vsparta.termindex.elastic.index_async import AsyncElasticsearchIndex
from vsparta.termindex.errors import EngineUnavailable, InvalidDocument
from vsparta.termindex.oracle import round_like_elasticsearch

pytestmark = pytest.mark.elasticsearch


def to_arrays(docs: list[TermDocument]) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    indptr = np.cumsum([0] + [len(d.weights) for d in docs]).astype(np.int64)
    term_ids = np.array([t for d in docs for t in d.weights], dtype=np.int32)
    weights = np.array([w for d in docs for w in d.weights.values()], dtype=np.float32)
    return [d.id for d in docs], indptr, term_ids, weights


def test_arrays_and_documents_store_the_same_thing(es_url: str) -> None:
    """``upsert_arrays`` (float32 text, several connections) == ``upsert`` (dicts), per document,
    at Elasticsearch's rounding; ids, metadata and the count agree too."""
    docs = random_docs(400, 300, seed=3)
    docs = [TermDocument(d.id, {t: float(np.float32(w)) for t, w in d.weights.items()}, {"i": k}) for k, d in
            enumerate(docs)]  # fmt: skip
    ids, indptr, term_ids, weights = to_arrays(docs)
    with (
        fresh_index(es_url, "arrays", chunk_size=37, connections=3) as a,
        fresh_index(es_url, "dicts", connections=1) as b,
    ):
        with a.bulk_load():
            assert a.upsert_arrays(ids, indptr, term_ids, weights, [d.metadata for d in docs]) == len(docs)
        assert b.upsert(docs) == len(docs)
        assert a.count() == b.count() == len(docs)
        for d in docs[::23]:
            got, ref = a.get(d.id), b.get(d.id)
            assert got.metadata == ref.metadata == d.metadata
            assert set(got.weights) == set(d.weights)
            for t, w in d.weights.items():
                assert round_like_elasticsearch(got.weights[t]) == round_like_elasticsearch(w)
        q = dict(list(docs[5].weights.items())[:6])
        assert [(h.id, h.score) for h in a.search(q, k=10)] == [(h.id, h.score) for h in b.search(q, k=10)]
        # Idempotent by id: the same arrays again leave the count unchanged.
        a.upsert_arrays(ids, indptr, term_ids, weights)
        assert a.count() == len(docs)


@pytest.mark.parametrize(
    ("indptr", "term_ids", "weights", "match"),
    [
        ([0, 2], [1, 2], [1.0, 2.0], "indptr must have"),
        ([0, 1, 1], [1], [1.0], "at least one term"),
        ([0, 1, 2], [1, -2], [1.0, 1.0], "non-negative"),
        ([0, 1, 2], [1, 2], [1.0, float("nan")], "outside the float32 normal range"),
        ([0, 1, 2], [1, 2], [1.0, 0.0], "outside the float32 normal range"),
        ([0, 2, 3], [4, 4, 1], [1.0, 2.0, 3.0], "twice"),
    ],
)
def test_bad_arrays_are_refused_before_anything_is_sent(
    es_url: str, indptr: list, term_ids: list, weights: list, match: str
) -> None:
    with fresh_index(es_url, "badarr") as index:
        with pytest.raises(InvalidDocument, match=match):
            index.upsert_arrays(["a", "b"], np.array(indptr), np.array(term_ids), np.array(weights))
        assert index.count() == 0


def test_chunks_are_cut_by_bytes_and_count() -> None:
    actions = [(str(i), b"x" * 600) for i in range(10)]
    sizes = [len(c) for c in chunks(actions, BulkOptions(chunk_size=4, max_chunk_bytes=1500))]
    assert sizes == [2, 2, 2, 2, 2]  # 3 x 600 bytes would pass 1500
    assert [len(c) for c in chunks(actions, BulkOptions(chunk_size=4))] == [4, 4, 2]
    big = [("big", b"x" * 5000)]
    assert [len(c) for c in chunks(big, BulkOptions(max_chunk_bytes=1024))] == [1]  # sent alone


def test_load_settings_are_restored_and_a_full_load_is_force_merged(es_url: str) -> None:
    with fresh_index(es_url, "merge", chunk_size=50) as index:
        (name,) = index._concrete()

        def settings() -> dict:
            return index._client.indices.get_settings(index=name, flat_settings=True)[name]["settings"]

        before = settings()
        docs = random_docs(600, 200, seed=4)
        with index.bulk_load():
            during = settings()
            for i in range(0, len(docs), 100):  # several refreshes' worth of segments
                index.upsert(docs[i : i + 100])
                index._client.indices.flush(index=name)
        assert during["index.translog.flush_threshold_size"] == "1gb"
        assert during["index.refresh_interval"] == "-1"
        after = settings()
        restored = ["index.translog.flush_threshold_size", "index.refresh_interval"]
        restored.append("index.number_of_replicas")
        for key in restored:
            assert after.get(key) == before.get(key), key
        assert index.segments() > 1
        note = index.finish_load()
        assert note.startswith("force-merged") and index.segments() == index._shards  # one per shard
        assert index.count() == len(docs)
        # A small top-up afterwards is not worth merging the whole index again.
        again = ElasticsearchIndex(es_url, index.alias)
        try:
            again.upsert(docs[:10])
            assert again.finish_load().startswith("no force-merge (10 of 600")
        finally:
            again.close()


def test_new_version_from_the_cli_swaps_on_completion_and_rollback_swaps_back(es_url: str, tmp_path) -> None:
    """`vsparta index --new-version` writes v2 beside the serving v1, moves the alias when done;
    `vsparta index rollback` moves it back."""
    from vsparta.core.errors import UsageError
    from vsparta.indexer.cli import add_arguments, run

    alias = unique_name("cli")
    spec = f"{es_url}/{alias}"
    first = random_docs(30, 50, seed=1)
    with ElasticsearchIndex(es_url, alias, create=True) as v1:
        v1.upsert(first)
    export = tmp_path / "docs.jsonl"
    tokenizer = _tiny_tokenizer(tmp_path)
    second = [f'{{"id": "new-{i}", "terms": {{"cube": {1 + i / 10}, "red": 0.5}}}}' for i in range(12)]
    export.write_text("\n".join(second) + "\n")

    def cli(*argv: str) -> int:
        parser = argparse.ArgumentParser()
        add_arguments(parser)
        return run(parser.parse_args(list(argv)))

    try:
        load = [str(export), "--tokenizer", str(tokenizer), "--backend", spec, "--workers", "0"]
        assert cli(*load, "--new-version") == 0
        with ElasticsearchIndex(es_url, alias) as index:
            assert index.count() == 12 and [v.active for v in index.list_versions()] == [False, True]
        assert cli("rollback", "--backend", spec) == 0
        with ElasticsearchIndex(es_url, alias) as index:
            assert index.count() == 30 and [v.active for v in index.list_versions()] == [True, False]
        with pytest.raises(UsageError, match="--new-version writes one new version in one job"):
            # vsparta.cli.main turns it into one sentence and exit code 2 (tests/test_cli.py)
            cli(str(export), "--backend", spec, "--new-version", "--resume", "--tokenizer", str(tokenizer))
    finally:
        with ElasticsearchIndex(es_url, alias) as index:
            index.drop()


def _tiny_tokenizer(tmp_path):
    """A real WordPiece tokenizer folder with a handful of words (what `--tokenizer` reads)."""
    return tokenizer_folder(tmp_path, ["red", "cube", "blue"])


@pytest.fixture
def not_elasticsearch() -> Iterator[str]:
    """A real HTTP server that answers every request with a plain web page."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            body = b"<html>hello</html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_HEAD = do_POST = do_PUT = do_GET

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_web_server_that_is_not_elasticsearch_is_unavailable_not_a_crash(not_elasticsearch: str) -> None:
    with pytest.raises(EngineUnavailable, match="not an Elasticsearch 7.x server"):
        open_index(f"{not_elasticsearch}/images")


def test_async_reader_names_the_problem_too(not_elasticsearch: str) -> None:
    async def run() -> None:
        index = AsyncElasticsearchIndex(not_elasticsearch, "images")
        try:
            with pytest.raises(EngineUnavailable, match="not an Elasticsearch 7.x server"):
                await index.search({1: 1.0}, k=3)
            with pytest.raises(EngineUnavailable, match="not an Elasticsearch 7.x server"):
                await index.count()
            assert await index.ready() is False
        finally:
            await index.close()

    asyncio.run(run())
