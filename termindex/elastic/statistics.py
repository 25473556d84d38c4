"""Document frequencies from Elasticsearch/OpenSearch, for query-side IDF weights (``termindex.scoring``).

``rank_features`` answers neither ``term`` nor ``exists`` queries, and no aggregation reads it, but
a ``rank_feature`` query matches exactly the documents that hold the feature. So one ``_msearch``
asks, per term, for the hit count of that query as a filter (``size`` 0: nothing scored or
fetched; Elasticsearch caches such answers per shard until the next refresh), plus one
``match_all`` with a single hit, whose total is the document count and whose ``_index`` names the
concrete version behind the alias (the cache key: a re-index moves the alias to a new one).
One round trip per query at most, none when every term is cached (``StatisticsCache``, below;
``reads.ReadSteps``).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from vsparta.termindex.base import TermStatistics
from vsparta.termindex.elastic.common import check_shards
from vsparta.termindex.elastic.translate import error_reason
from vsparta.termindex.errors import IndexNotFound, TermIndexError


def statistics_body(term_ids: Sequence[int]) -> list[dict[str, Any]]:
    """The ``_msearch`` body: the document count first, then one count per term (in order)."""
    body: list[dict[str, Any]] = [{}, {"size": 1, "track_total_hits": True, "_source": False}]
    for t in term_ids:
        body.append({})
        body.append(
            {
                "size": 0,
                "track_total_hits": True,
                "query": {"constant_score": {"filter": {"rank_feature": {"field": f"terms.{int(t)}"}}}},
            }
        )
    return body


def _checked(resp: Mapping[str, Any]) -> Mapping[str, Any]:
    error = resp.get("error")
    if error:
        if isinstance(error, Mapping) and error.get("type") == "index_not_found_exception":
            raise IndexNotFound(str(error.get("reason") or error["type"]))
        raise TermIndexError(f"term statistics failed: {error_reason(error)}")
    check_shards(resp, "term statistics")
    return resp


def parse_statistics(answer: Mapping[str, Any], term_ids: Sequence[int]) -> tuple[str, int, dict[int, int]]:
    """(version = the concrete index, document count, ``{term: df}``) of a ``statistics_body`` answer."""
    responses = answer["responses"]
    if len(responses) != len(term_ids) + 1:
        raise TermIndexError(f"term statistics: {len(responses)} answers for {len(term_ids) + 1} requests")
    first = _checked(responses[0])
    hits = first["hits"]["hits"]
    version = str(hits[0]["_index"]) if hits else ""
    n_docs = int(first["hits"]["total"]["value"])
    answers = zip(term_ids, responses[1:], strict=True)
    df = {int(t): int(_checked(r)["hits"]["total"]["value"]) for t, r in answers}
    return version, n_docs, df


class StatisticsCache:
    """Document frequencies of one index version, at most ``max_terms`` terms (least recently used
    go first), each at most ``max_age_s`` old (documents written into the same version move them).

    A new ``version`` (the alias moved to a rebuilt index) empties it. One per engine handle; a
    lock keeps it whole when a synchronous handle is shared by threads.
    """

    def __init__(
        self, max_terms: int = 65_536, max_age_s: float = 60.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if max_terms < 1 or max_age_s <= 0:
            raise ValueError("max_terms must be >= 1 and max_age_s > 0")
        self.max_terms = max_terms
        self.max_age_s = max_age_s
        self._clock = clock
        self.version: str | None = None
        self.n_docs = 0
        self._df: OrderedDict[int, tuple[int, float]] = OrderedDict()  # term -> (df, when)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._df)

    def clear(self) -> None:
        with self._lock:
            self._clear()

    def _clear(self) -> None:
        self.version = None
        self.n_docs = 0
        self._df.clear()

    def seen_version(self, version: str) -> None:
        """A search answered from ``version``: forget everything if it is not the cached one."""
        with self._lock:
            if self.version is not None and version != self.version:
                self._clear()

    def missing(self, ids: Iterable[int]) -> list[int]:
        """The ids to ask the engine for (absent or too old), ascending."""
        now = self._clock()
        with self._lock:
            return [
                t
                for t in sorted(set(ids))
                if (entry := self._df.get(t)) is None or now - entry[1] > self.max_age_s
            ]

    def store(self, version: str, n_docs: int, df: Mapping[int, int]) -> None:
        """Fresh counts from ``version`` (which empties the cache when it is a new one)."""
        now = self._clock()
        with self._lock:
            if version != self.version:
                self._clear()
                self.version = version
            self.n_docs = int(n_docs)
            for t, d in df.items():
                self._df[t] = (int(d), now)
                self._df.move_to_end(t)
            while len(self._df) > self.max_terms:
                self._df.popitem(last=False)

    def statistics(self, ids: Iterable[int]) -> TermStatistics:
        """The cached numbers for ``ids`` (call ``missing`` and ``store`` first)."""
        df = {}
        with self._lock:
            for t in set(ids):
                entry = self._df.get(t)
                if entry is not None:
                    df[t] = entry[0]
                    self._df.move_to_end(t)
            return TermStatistics(self.n_docs, df, self.version or "")
