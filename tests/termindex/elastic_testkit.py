"""Helpers for the Elasticsearch engine tests: unique index names, random corpora, a real HTTP
proxy in front of the node that injects 429s and dropped or refused connections, and the local
3-node clusters that tests kill nodes of and cut apart (``FaultCluster``).

The proxy is a real server on 127.0.0.1 (no mocking of the client): the client library goes
through its whole transport, retry and error path exactly as it would against a sick cluster.
"""

from __future__ import annotations

import http.client
import http.server
import json
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import urlsplit

import numpy as np

from vsparta.bench.fault_cluster import LocalCluster
from vsparta.bench.fault_net import NetFaults
from vsparta.termindex import open_index
from vsparta.termindex.base import Hit, TermDocument
from vsparta.termindex.elastic.index import ElasticsearchIndex

if TYPE_CHECKING:
    from vsparta.termindex.oracle import BruteForceOracle

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "content-length"}


def unique_name(area: str) -> str:
    return f"elastic-{area}-{uuid.uuid4().hex[:10]}"


# The engine lines the protocol tests run on: fixture id -> (registry engine, line).
ENGINE_LINES = {
    "elasticsearch-7.17": ("elasticsearch", "7.17"),
    "opensearch-2.19": ("opensearch", "2.19"),
    "opensearch-3.x": ("opensearch", "3.x"),
}


class SearchServer(NamedTuple):
    """A running server of one engine: its registry name and base URL; ``spec`` names an index."""

    engine: str  # "elasticsearch" or "opensearch"
    url: str  # http://HOST:PORT

    def spec(self, name: str) -> str:
        return f"{self.url}/{name}" if self.engine == "elasticsearch" else f"{self.engine}+{self.url}/{name}"


def open_on(server: str | SearchServer, name: str, **options: Any) -> ElasticsearchIndex:
    """The index ``name`` on a server (a plain URL is Elasticsearch), opened through the registry."""
    spec = server.spec(name) if isinstance(server, SearchServer) else f"{server}/{name}"
    index = open_index(spec, **options)
    assert isinstance(index, ElasticsearchIndex)  # OpenSearchIndex is one
    return index


@contextmanager
def fresh_index(server: str | SearchServer, area: str, **options: object) -> Iterator[ElasticsearchIndex]:
    """A new alias + version for one test, deleted afterwards whatever happens."""
    index = open_on(server, unique_name(area), create=True, **options)
    try:
        yield index
    finally:
        index.drop()
        index.close()


def random_docs(
    n: int, vocab: int, seed: int, *, mean_terms: int = 60, dup_fraction: float = 0.05
) -> list[TermDocument]:
    """Zipf-ish corpus: popular terms appear in many documents, weights are log-normal.

    A ``dup_fraction`` of documents copy another document's terms under a new id, so exact
    score ties occur and the id tie-break is exercised, not just hoped for.
    """
    rng = np.random.default_rng(seed)
    popularity = 1.0 / np.arange(1, vocab + 1) ** 1.1
    popularity /= popularity.sum()
    docs: list[TermDocument] = []
    for i in range(n):
        doc_id = f"doc-{i:05d}"
        if docs and rng.random() < dup_fraction:
            src = docs[int(rng.integers(len(docs)))]
            docs.append(TermDocument(doc_id, dict(src.weights), {"copy_of": src.id}))
            continue
        m = int(np.clip(rng.poisson(mean_terms), 1, vocab))
        terms = rng.choice(vocab, size=m, replace=False, p=popularity)
        weights = np.exp(rng.normal(-0.5, 1.2, size=m))
        docs.append(
            TermDocument(doc_id, {int(t): float(w) for t, w in zip(terms, weights, strict=True)}, {"i": i})
        )
    return docs


@contextmanager
def served_index(es_url: str, prefix: str, **options: Any) -> Iterator[ElasticsearchIndex]:
    """A served index with 50 random documents (``random_docs`` seed 1), deleted afterwards."""
    index = ElasticsearchIndex(es_url, unique_name(prefix), create=True, **options)
    try:
        index.upsert(random_docs(50, 300, seed=1))
        yield index
    finally:
        index.drop()
        index.close()


def random_queries(n: int, vocab: int, seed: int) -> list[dict[int, float]]:
    """1-8 tokens drawn like query words (Zipf); boosts are counts, some explicit float weights."""
    rng = np.random.default_rng(seed)
    popularity = 1.0 / np.arange(1, vocab + 1) ** 0.9
    popularity /= popularity.sum()
    queries = []
    for j in range(n):
        m = int(rng.integers(1, 9))
        tokens = rng.choice(vocab, size=m, replace=True, p=popularity)
        q: dict[int, float] = {}
        for t in tokens:
            q[int(t)] = q.get(int(t), 0.0) + 1.0
        if j % 3 == 0:  # explicit weights, not just counts
            q = {t: float(np.round(rng.uniform(0.1, 3.0), 3)) for t in q}
        queries.append(q)
    return queries


# Lucene scores in float32: each clause is (float)(boost * ln(1 + w)) (relative error <= 2**-24,
# plus 2**-24 for a non-integer boost rounded to float32), the clauses are summed in double and the
# sum rounded to float32 (2**-24). All clauses are positive, so |es - exact| <= 3 * 2**-24 * exact;
# 4 leaves room for a last-bit difference between Java's and numpy's log.
FLOAT32_REL_TOL = 4 * 2.0**-24


def float32_tol(score: float) -> float:
    return FLOAT32_REL_TOL * abs(score) + 1e-30


def check_es_top_k(
    hits: list[Hit], oracle: BruteForceOracle, query: dict[int, float], k: int
) -> tuple[bool, bool]:
    """Assert Elasticsearch's top k against an oracle built on ES-rounded weights.

    Returns (identical to the oracle's list, contains an exact score tie). Only float32
    near-ties may differ from the oracle's order: two documents whose exact scores lie within
    the float32 error bound can compare equal (then by id) or swapped in Elasticsearch.
    """
    pos = {doc_id: i for i, doc_id in enumerate(oracle.ids)}
    scores, matched = oracle.scores(query)
    assert len(hits) == min(k, int(matched.sum())), query
    # Each hit's float32 score is the oracle's within float32 evaluation error.
    for h in hits:
        s = scores[pos[h.id]]
        assert abs(h.score - s) <= float32_tol(s), (query, h.id, h.score, s)
    # Elasticsearch's own order: score descending, then id ascending on equal scores.
    tied = False
    for a, b in zip(hits, hits[1:], strict=False):
        assert a.score > b.score or (a.score == b.score and a.id < b.id), (query, a, b)
        tied |= a.score == b.score
    # Against the oracle's exact ranking (score desc, id asc over matching documents).
    idx = np.flatnonzero(matched)
    expected_ids = [oracle.ids[i] for i in sorted(idx, key=lambda i: (-scores[i], oracle.ids[i]))[:k]]
    got_ids = [h.id for h in hits]
    if got_ids == expected_ids:
        return True, tied
    for g, e in zip(got_ids, expected_ids, strict=True):
        if g != e:  # a float32 near-tie at this position
            sg, se = scores[pos[g]], scores[pos[e]]
            assert abs(sg - se) <= float32_tol(sg) + float32_tol(se), (query, g, sg, e, se)
    # And no matching document left out may definitely beat the last hit.
    returned = set(got_ids)
    for i in idx:
        if oracle.ids[i] not in returned:
            assert scores[i] <= hits[-1].score + float32_tol(scores[i]), (query, oracle.ids[i], scores[i])
    return False, tied


def tokenizer_folder(parent: Path, words: list[str]) -> Path:
    """A real WordPiece tokenizer folder (``parent/model``) knowing ``words``: what ``--tokenizer``
    and the service's ``model_path`` read."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {w: i for i, w in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words])}
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    out = parent / "model"
    out.mkdir()
    tok.save(str(out / "tokenizer.json"))
    return out


@dataclass
class FaultCluster:
    """A local 3-node cluster (``bench.fault_cluster``) behind this session's netfilter chains."""

    cluster: LocalCluster
    faults: NetFaults

    def server(self) -> SearchServer:
        """Every node as one multi-host server: what clients are given, so any node may fail."""
        return SearchServer(self.cluster.engine, f"http://{self.cluster.hosts()}")

    def healthy(self) -> None:
        """Every fault healed, every node up, green: how each test finds (and leaves) the cluster."""
        self.faults.heal()
        self.cluster.start()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class FaultProxy:
    """Forwards HTTP to the node; the first ``failures`` bulk requests (requests whose path holds
    ``path``) fail as ``mode`` says.

    Modes: ``"429"`` (whole request rejected), ``"503"`` (a cluster without a master),
    ``"429-items"`` (200 with every item rejected with 429, as a busy node answers), ``"drop"``
    (connection closed without a response).
    ``delay`` (seconds) holds every ``_search`` request that long first (a stalled node).
    ``stop()``/``start()`` close and reopen the listening port ("connection refused" between).
    """

    def __init__(
        self,
        upstream: str,
        mode: str = "429",
        failures: int = 0,
        port: int = 0,
        delay: float = 0.0,
        path: str = "_bulk",
    ) -> None:
        self.upstream = urlsplit(upstream)
        self.path = path
        self.delay = delay
        self.mode = mode
        self.failures = failures
        self.bulk_attempts = 0
        self.bulk_failed = 0
        self.requests: list[tuple[str, str]] = []  # (method, path) of every request, in order
        self.port = port or free_port()
        self._lock = threading.Lock()
        self._server: http.server.ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _should_fail(self, path: str) -> bool:
        if self.path not in path:
            return False
        with self._lock:
            self.bulk_attempts += 1
            if self.bulk_failed < self.failures:
                self.bulk_failed += 1
                return True
        return False

    def _handler(self) -> type[http.server.BaseHTTPRequestHandler]:
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # one request per connection: stop() really stops

            def log_message(self, *args: object) -> None:
                pass

            def _reply(self, status: int, body: bytes, headers: dict[str, str]) -> None:
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def _forward(self) -> None:
                proxy.requests.append((self.command, self.path))
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                if proxy.delay and "_search" in self.path:
                    time.sleep(proxy.delay)
                if proxy._should_fail(self.path):
                    if proxy.mode == "drop":
                        self.close_connection = True
                        self.connection.shutdown(socket.SHUT_RDWR)
                        return
                    es_headers = {"Content-Type": "application/json", "X-Elastic-Product": "Elasticsearch"}
                    if proxy.mode == "503":
                        err = {"error": {"type": "master_not_discovered_exception", "reason": "injected"}}
                        self._reply(503, json.dumps({**err, "status": 503}).encode(), es_headers)
                        return
                    if proxy.mode == "429":
                        err = {
                            "error": {"type": "es_rejected_execution_exception", "reason": "injected"},
                            "status": 429,
                        }
                        self._reply(429, json.dumps(err).encode(), es_headers)
                        return
                    lines = [json.loads(x) for x in body.decode().splitlines() if x.strip()]
                    items = []
                    for line in lines:
                        if len(line) == 1 and next(iter(line)) in ("index", "delete", "create", "update"):
                            op, meta = next(iter(line.items()))
                            items.append(
                                {
                                    op: {
                                        "_index": meta.get("_index"),
                                        "_id": meta.get("_id"),
                                        "status": 429,
                                        "error": {"type": "es_rejected_execution_exception", "reason": "inj"},
                                    }
                                }
                            )
                    resp = {"took": 1, "errors": True, "items": items}
                    self._reply(200, json.dumps(resp).encode(), es_headers)
                    return
                conn = http.client.HTTPConnection(proxy.upstream.hostname, proxy.upstream.port, timeout=60)
                try:
                    headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
                    conn.request(self.command, self.path, body=body or None, headers=headers)
                    up = conn.getresponse()
                    data = up.read()
                    out = {k: v for k, v in up.getheaders() if k.lower() not in HOP_BY_HOP}
                    self._reply(up.status, data, out)
                finally:
                    conn.close()

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _forward

        return Handler

    def start(self) -> FaultProxy:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), self._handler())
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
