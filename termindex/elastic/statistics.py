"""Document frequencies from Elasticsearch/OpenSearch, for query-side IDF weights (``termindex.idf``).

``rank_features`` answers neither ``term`` nor ``exists`` queries, and no aggregation reads it, but
a ``rank_feature`` query matches exactly the documents that hold the feature. So one ``_msearch``
asks, per term, for the hit count of that query as a filter (``size`` 0: nothing scored or
fetched; Elasticsearch caches such answers per shard until the next refresh), plus one
``match_all`` with a single hit, whose total is the document count and whose ``_index`` names the
concrete version behind the alias (the cache key: a re-index moves the alias to a new one).
One round trip per query at most, none when every term is cached (``reads.ReadSteps``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from vsparta.termindex.elastic.common import check_shards
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
        kind = str(error.get("type", "")) if isinstance(error, Mapping) else str(error)
        reason = str(error.get("reason", "")) if isinstance(error, Mapping) else ""
        if kind == "index_not_found_exception":
            raise IndexNotFound(reason or kind)
        raise TermIndexError(f"term statistics failed: {kind}: {reason}")
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
