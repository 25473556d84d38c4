"""Our two engines through their public ``TermIndex`` API, exactly as the indexer and service use them."""

from __future__ import annotations

import contextlib
import json
import logging
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

from vsparta.bench.corpus import Corpus
from vsparta.bench.engines.base import Adapter, Skip, dir_bytes
from vsparta.termindex import open_index

log = logging.getLogger(__name__)

LOAD_CHUNK = 1000  # images per upsert call: bounded memory for the per-row dicts
ARRAY_CHUNK = 20_000  # images per upsert_arrays call (~20M postings: a few hundred MB of temporaries)


def _load(index, corpus: Corpus) -> None:
    for start, stop in corpus.chunks(LOAD_CHUNK):
        index.upsert(corpus.term_documents(start, stop))


def _rows(corpus: Corpus, hits) -> list[int]:
    return [corpus.row_of(h.id) for h in hits]


class EmbeddedAdapter(Adapter):
    name = "ours: embedded"
    kind = "exact, half-float weights"  # IEEE fp16 postings: near-ties may reorder

    def check(self, corpus: Corpus, free_bytes: int) -> None:
        try:
            import vsparta.termindex.embedded  # noqa: F401
        except ImportError as e:
            raise Skip(f"vsparta.termindex.embedded not available yet ({e})") from None

    def build(self, corpus: Corpus, workdir: Path) -> None:
        self.corpus = corpus
        self.path = workdir / "embedded"
        self.index = open_index(f"embedded:{self.path}", create=True, vocab_size=corpus.vocab_size)
        if hasattr(self.index, "upsert_arrays"):  # the bulk path the indexer uses: no per-term objects
            corpus.upsert_into(self.index, ARRAY_CHUNK)
        else:
            _load(self.index, corpus)
        if hasattr(self.index, "compact"):
            self.index.compact()  # one segment: what a finished indexing job leaves behind
        if self.index.count() != corpus.n_docs:
            raise RuntimeError(f"embedded index holds {self.index.count()} images, expected {corpus.n_docs}")

    def search(self, qi: int, k: int) -> list[int]:
        return _rows(self.corpus, self.index.search(self.queries[qi], k=k))

    def disk_bytes(self) -> int | None:
        return dir_bytes(self.path)

    def close(self) -> None:
        if getattr(self, "index", None) is not None:
            self.index.close()
            self.index = None


def es_request(url: str, method: str = "GET", body: dict | None = None) -> dict:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.loads(resp.read() or b"{}")


class ElasticsearchAdapter(Adapter):
    name = "ours: Elasticsearch"
    kind = "exact, 9-bit weights"  # ES keeps 9 significant bits of a rank_feature
    in_process = False

    def __init__(self, url: str, prefix: str = "bench-") -> None:
        self.url = url.rstrip("/")
        self.alias = f"{prefix}{uuid.uuid4().hex[:8]}"

    def check(self, corpus: Corpus, free_bytes: int) -> None:
        try:
            import vsparta.termindex.elastic  # noqa: F401
        except ImportError as e:
            raise Skip(f"vsparta.termindex.elastic not available yet ({e})") from None
        try:
            es_request(f"{self.url}/_cluster/health")
        except (urllib.error.URLError, OSError) as e:
            raise Skip(f"no Elasticsearch at {self.url} ({e})") from None

    def build(self, corpus: Corpus, workdir: Path) -> None:
        """Load, then what a complete indexing job does (``finish_load``: force-merge); the load
        and the merge are timed apart (``build_info``), so load docs/s is the bulk path alone."""
        self.corpus = corpus
        self.index = open_index(self.spec(), create=True)
        t0 = time.perf_counter()
        with self.index.bulk_load():
            # Arrays straight to bulk bodies; the engine keeps several requests in flight (one
            # shard indexes each request on one write thread) while it builds the next ones.
            corpus.upsert_into(self.index, 10 * LOAD_CHUNK)
        es_request(f"{self.url}/{self.alias}/_refresh", "POST")
        load_s = time.perf_counter() - t0
        if self.index.count() != corpus.n_docs:
            raise RuntimeError(f"ES index holds {self.index.count()} images, expected {corpus.n_docs}")
        self.loaded_bytes = self.disk_bytes()
        t1 = time.perf_counter()
        summary = self.index.finish_load()
        self.build_info = {
            "load_s": load_s,
            "load_docs_per_s": corpus.n_docs / load_s,
            "merge_s": time.perf_counter() - t1,
            "segments": self.index.segments(),
            "bytes_per_term_loaded": self.loaded_bytes / max(corpus.nnz, 1),
            "finish_load": summary,
        }

    def search(self, qi: int, k: int) -> list[int]:
        return _rows(self.corpus, self.index.search(self.queries[qi], k=k))

    def disk_bytes(self) -> int | None:
        stats = es_request(f"{self.url}/{self.alias}/_stats/store")
        return int(stats["_all"]["primaries"]["store"]["size_in_bytes"])

    def spec(self) -> str:
        return f"{self.url}/{self.alias}"

    def wand_follower(self) -> ElasticsearchWandAdapter:
        return ElasticsearchWandAdapter(self)

    def close(self) -> None:
        """Delete every index behind our alias (only ours: the alias name is random)."""
        if getattr(self, "index", None) is not None:
            try:
                if hasattr(self.index, "drop"):
                    self.index.drop()
            finally:
                self.index.close()
                self.index = None
        try:
            indices = list(es_request(f"{self.url}/_alias/{self.alias}"))
        except urllib.error.HTTPError:
            indices = []
        for name in indices:
            if name.startswith("bench-"):
                es_request(f"{self.url}/{name}", "DELETE")
        with contextlib.suppress(urllib.error.HTTPError):
            es_request(f"{self.url}/{self.alias}", "DELETE")  # an index (not alias) of that name


class OpenSearchAdapter(ElasticsearchAdapter):
    """The same engine code on an OpenSearch node (2.19 or 3.x), through an ``opensearch+http``
    spec: rows beside Elasticsearch's, same documents, same queries."""

    def __init__(self, url: str, line: str) -> None:
        super().__init__(url)
        self.name = f"ours: OpenSearch {line}"

    def spec(self) -> str:
        return f"opensearch+{self.url}/{self.alias}"


class ElasticsearchWandAdapter(Adapter):
    """The same index searched with ``track_total_hits=False`` (Lucene's block-max WAND): the
    engine's other scoring option, measured beside its default."""

    name = "ours: Elasticsearch, WAND"
    kind = "exact, 9-bit weights"
    in_process = False

    def __init__(self, backend: ElasticsearchAdapter) -> None:
        self.backend = backend

    def check(self, corpus: Corpus, free_bytes: int) -> None:
        if getattr(self.backend, "index", None) is None:
            raise Skip("Elasticsearch index not built")

    def build(self, corpus: Corpus, workdir: Path) -> None:
        self.corpus = corpus
        self.index = open_index(self.backend.spec(), track_total_hits=False)

    def search(self, qi: int, k: int) -> list[int]:
        return _rows(self.corpus, self.index.search(self.queries[qi], k=k))

    def disk_bytes(self) -> int | None:
        return self.backend.disk_bytes()

    def close(self) -> None:
        if getattr(self, "index", None) is not None:
            self.index.close()
            self.index = None
