"""The one read contract (``termindex.reader``) as the service uses it: calls counted at the reader.

Real engines (embedded, a real Elasticsearch node), a reader that only counts and forwards.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from vsparta.service.app import create_app
from vsparta.service.settings import ServiceSettings
from vsparta.termindex import Hit, TermDocument, open_index
from vsparta.termindex.base import TermStatistics
from vsparta.termindex.reader import AsyncReader, Capability


class CountingReader(AsyncReader):
    """Forwards every read to the engine's own reader and counts it by name."""

    def __init__(self, inner: AsyncReader) -> None:
        self.inner = inner
        self.calls: Counter[str] = Counter()

    @property
    def capabilities(self) -> frozenset[Capability]:  # type: ignore[override]
        return self.inner.capabilities

    async def search(self, query: Mapping[int, float], k: int, explain: bool) -> list[Hit]:
        self.calls["search"] += 1
        return await self.inner.search(query, k, explain)

    async def get(self, doc_id: str) -> TermDocument:
        self.calls["get"] += 1
        return await self.inner.get(doc_id)

    async def count(self) -> int:
        self.calls["count"] += 1
        return await self.inner.count()

    async def term_statistics(self, term_ids: Sequence[int]) -> TermStatistics:
        self.calls["term_statistics"] += 1
        return await self.inner.term_statistics(term_ids)

    async def health(self) -> str:
        self.calls["health"] += 1
        return await self.inner.health()

    async def close(self) -> None:
        await self.inner.close()


@contextmanager
def counted(settings: ServiceSettings) -> Iterator[tuple[TestClient, CountingReader]]:
    """A client of a new app whose engine wrapper reads through a ``CountingReader``."""
    app = create_app(settings)
    with TestClient(app, raise_server_exceptions=False) as c:
        counting = CountingReader(app.state.engine.reader)
        app.state.engine.reader = counting
        yield c, counting


def test_similar_reads_the_document_once_and_searches_once(
    backend_spec: str, make_settings: Callable[..., ServiceSettings]
) -> None:
    with counted(make_settings(backend_spec)) as (c, counting):
        r = c.get("/images/red-cube/similar", params={"k": 3, "explain": True})
        assert r.status_code == 200, r.text
        assert counting.calls == Counter({"get": 1, "search": 1})
        body = r.json()
        ids = [x["id"] for x in body["results"]]
        assert len(ids) == 3 and "red-cube" not in ids  # k results, the image itself left out
        assert body["similar_to"]["id"] == "red-cube"
    with open_index(backend_spec) as index:  # the engine's own "more like this" (TermIndex.similar)
        assert ids == [h.id for h in index.similar("red-cube", k=3, n_terms=32)]


def test_similar_of_an_image_that_is_not_there_is_one_get(
    embedded_spec: str, make_settings: Callable[..., ServiceSettings]
) -> None:
    with counted(make_settings(embedded_spec)) as (c, counting):
        assert c.get("/images/nothing-here/similar").status_code == 404
        assert counting.calls == Counter({"get": 1})


# The project files whose code one POST /search runs on the event loop, from the request's body to
# the response (the HTTP middleware and the engine behind its reader aside): docs/architecture.md
# section 3 lists them. The chain the request and the answer pass along is routes -> search ->
# engines -> reader -> (engine) -> search -> results; the rest are helpers asked on the way.
SEARCH_PATH = {
    "service/routes.py",  # the route and its dependencies (the pipeline, the engine)
    "service/schemas.py",  # the request body's checks
    "service/search.py",  # the pipeline (its stages timed into the service's metrics)
    "model/query_tokenizer.py",  # tokenize
    "termindex/weightings/counts.py",  # the default weighting
    "service/engines.py",  # the timeout wrapper and its outage log (a success ends an outage)
    "termindex/reader.py",  # the embedded engine's reader (threads)
    "service/matching.py",  # the match rule (its evidence, idf x log(1 + w) from termindex/scoring.py,
    # is weighed only when a min_evidence asks for it: 0 by default)
    "service/english.py",  # the match rule's English words (function words, plurals, numbers)
    "service/results.py",  # hits into the response, word-pieces into words
}


def test_search_path_files(embedded_spec: str, make_settings: Callable[..., ServiceSettings]) -> None:
    repo = Path(__file__).resolve().parents[2]
    ran: set[str] = set()

    def profile(frame: Any, event: str, arg: Any) -> None:
        path = Path(frame.f_code.co_filename)
        if event == "call" and path.is_relative_to(repo) and ".venv" not in path.parts:
            ran.add(path.relative_to(repo).as_posix())

    app = create_app(make_settings(embedded_spec))
    with TestClient(app, raise_server_exceptions=False) as c:
        body = {"query": "red cube", "k": 3}
        assert c.post("/search", json=body).status_code == 200  # warm: imports, caches
        c.portal.call(sys.setprofile, profile)  # the thread the app runs on
        try:
            assert c.post("/search", json=body).status_code == 200
        finally:
            c.portal.call(sys.setprofile, None)
    ran.discard("service/middleware.py")  # wraps every request, not the search path
    assert ran == SEARCH_PATH
