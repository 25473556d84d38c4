"""The one search pipeline: parse -> tokenize and weight -> retrieve -> re-rank (optional) -> present.

``POST /search``, ``GET /images/{id}/similar`` and ``vsparta search`` all run it, so a response is
built in one place and a new stage is added once. Each step is a method or a hook:

- **parse** (``SearchQuery``): what was asked, already checked against the schema's limits.
- **tokenize and weight** (``SearchPipeline.weigh``): a text becomes vocabulary ids with their
  counts, then a ``Weighting`` turns counts into the weights the engine is sent: ``counts`` (the
  default, the paper's rule: ``term_counts``) or ``idf`` (count x the token's IDF from the index's
  own document frequencies, ``termindex.idf``; the engine is asked for them first:
  ``AsyncReader.term_statistics``, cached per index version by the engines that need a request). Any
  ``QueryWeighting`` function can be given to ``SearchPipeline``/``create_app`` instead. Explicit
  ``terms`` are the client's own weights and are not re-weighted. The response names the weighting
  and lists the weights sent, so a reader can tell how each contribution came about.
- **retrieve**: any ``termindex.reader.AsyncReader`` (the service's, behind its timeout:
  ``service.engines.ServiceEngine``; the command line's, bare). "More like this" is a search for
  k + 1 of the image's heaviest terms (``termindex.base.similar_query``) without the image itself,
  on the document the route already fetched.
- **re-rank**: an optional ``Reranker``; none by default.
- **present**: ``vsparta.service.results`` turns hits into the JSON of ``SearchResponse``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import anyio.to_thread

from vsparta.model.query_tokenizer import QueryTokenizer
from vsparta.service.images import resolve_image
from vsparta.service.results import ResultView, caption_words, hit_to_result, image_fields, similar_words
from vsparta.service.words import Word, words_of
from vsparta.termindex import Hit, TermDocument
from vsparta.termindex.base import TermStatistics, similar_query, without_self
from vsparta.termindex.idf import COUNTS, IDF, WEIGHTINGS, idf_weights
from vsparta.termindex.reader import AsyncReader


class QueryError(ValueError):
    """A query the schema allows but that cannot be searched; ``errors`` are ``(loc, message)``."""

    def __init__(self, errors: Sequence[tuple[tuple[str | int, ...], str]]) -> None:
        super().__init__("; ".join(msg for _, msg in errors))
        self.errors = list(errors)


@dataclass(frozen=True)
class SearchQuery:
    """A parsed search: ``text`` or ``terms`` (exactly one), how many results and what to show."""

    text: str | None = None
    terms: Mapping[str, float] | None = None
    k: int = 10
    view: ResultView = field(default_factory=ResultView)


@dataclass(frozen=True)
class WeightedQuery:
    """What the engine is asked (``weights``: vocabulary id -> weight), and how to name it for people.

    ``tokens``: the query's tokens in order; ``words``: the words that name a hit's matched tokens;
    ``query_words``: the searched-for words the response lists.
    """

    weights: dict[int, float]
    tokens: list[str]
    words: list[Word]
    query_words: list[str]
    weighting: str = COUNTS  # how ``weights`` were made: a Weighting's name, "terms", "similar"


class QueryWeighting(Protocol):
    """Token counts of a text query -> the weights the engine is sent (the clause boosts).

    Must keep every weight finite and in (0, ``MAX_QUERY_WEIGHT``]; it may drop ids. A plain
    function needs nothing but the counts; one that needs the index's statistics is a ``Weighting``
    with ``statistics=True``.
    """

    def __call__(self, counts: Mapping[int, float]) -> dict[int, float]: ...


def term_counts(counts: Mapping[int, float]) -> dict[int, float]:
    """The default weighting: a token's weight is how often the query has it (the paper's rule)."""
    return dict(counts)


@dataclass(frozen=True)
class Weighting:
    """A named query weighting. ``statistics``: ``weigh`` gets the index's document frequencies of
    the query's tokens (``TermStatistics``), else None."""

    name: str
    weigh: Callable[[Mapping[int, float], TermStatistics | None], dict[int, float]]
    statistics: bool = False


def _idf(counts: Mapping[int, float], stats: TermStatistics | None) -> dict[int, float]:
    if stats is None:
        raise ValueError("idf weights need the index's term statistics")
    return idf_weights(counts, stats)


def weighting_named(name: str) -> Weighting:
    """``counts`` or ``idf`` (``termindex.idf.WEIGHTINGS``: what ``--query-weights`` takes)."""
    if name == COUNTS:
        return Weighting(COUNTS, lambda counts, _: term_counts(counts))
    if name == IDF:
        return Weighting(IDF, _idf, statistics=True)
    raise ValueError(f"query weights: one of {', '.join(WEIGHTINGS)}, got {name!r}")


def as_weighting(weighting: Weighting | QueryWeighting | str) -> Weighting:
    """A ``Weighting`` from a name, a ``Weighting`` or a plain ``QueryWeighting`` function."""
    if isinstance(weighting, Weighting):
        return weighting
    if isinstance(weighting, str):
        return weighting_named(weighting)
    if weighting is term_counts:
        return weighting_named(COUNTS)
    fn = weighting
    return Weighting(getattr(fn, "__name__", "custom"), lambda counts, _: fn(counts))


class Reranker(Protocol):
    """Re-orders the first ``candidates(k)`` hits and keeps at most ``k`` (best first)."""

    def candidates(self, k: int) -> int: ...

    async def rerank(self, query: WeightedQuery, hits: list[Hit], k: int) -> list[Hit]: ...


@dataclass
class SearchOutcome:
    """The response (``SearchResponse``'s JSON) and the hits it was made of (for local display)."""

    response: dict[str, Any]
    hits: list[Hit]


Stage = Callable[[str], AbstractContextManager[Any]]


def _no_stage(name: str) -> AbstractContextManager[Any]:
    return contextlib.nullcontext()


def query_from_text(text: str, tokenizer: QueryTokenizer) -> tuple[dict[int, float], list[str]]:
    """``({id: count}, tokens in order)`` of a text query; ``tokenize`` already drops the ids no query
    contains, [UNK] included (the rule: ``vsparta.model.query_tokenizer.non_query_ids``)."""
    ids = tokenizer.tokenize(text)
    counts: dict[int, float] = {}
    for i in ids:
        counts[i] = counts.get(i, 0.0) + 1.0
    return counts, [tokenizer.id_to_token(i) for i in ids]


class SearchPipeline:
    """One pipeline per app (or per command), with its tokenizer, image roots and hooks."""

    def __init__(
        self,
        tokenizer: QueryTokenizer,
        image_roots: Sequence[Path] = (),
        *,
        weighting: Weighting | QueryWeighting | str = term_counts,
        reranker: Reranker | None = None,
        stage: Stage = _no_stage,
    ) -> None:
        self.tokenizer = tokenizer
        self.image_roots = list(image_roots)
        self.weighting = as_weighting(weighting)
        self.reranker = reranker
        self.stage = stage

    # ---- tokenize and weight -----------------------------------------------------------------
    async def weigh(self, query: SearchQuery, engine: AsyncReader) -> WeightedQuery:
        """The engine query of a parsed search; ``QueryError`` for one that has nothing to search.
        A weighting that needs statistics asks ``engine`` for its tokens' document frequencies."""
        if query.text is not None:
            counts, tokens = query_from_text(query.text, self.tokenizer)
            if not counts:
                raise QueryError(
                    [(("body", "query"), "query has no searchable words (none in the vocabulary)")]
                )
            stats = None
            if self.weighting.statistics:
                with self.stage("statistics"):
                    stats = await engine.term_statistics(sorted(counts))
            weights = self.weighting.weigh(counts, stats)
            how = self.weighting.name
        else:
            terms = dict(query.terms or {})
            unknown = [t for t in terms if self.tokenizer.token_to_id(t) is None]
            if unknown:
                raise QueryError(
                    [
                        (("body", "terms", t), f"unknown token {t!r}: not in the model's vocabulary")
                        for t in unknown
                    ]
                )
            weights = self.tokenizer.terms_to_ids(terms)
            tokens = list(terms)
            how = "terms"
        words = words_of(tokens)
        return WeightedQuery(weights, tokens, words, [w.text for w in words], how)

    def similar_query(self, doc: TermDocument, n_terms: int) -> WeightedQuery:
        """A "more like this" query as people read it: the image's heaviest terms, named by its captions."""
        weights = similar_query(doc, n_terms)  # heaviest first
        top = list(weights.items())
        return WeightedQuery(
            weights,
            [self.tokenizer.id_to_token(t) for t, _ in top],
            caption_words(doc.metadata, self.tokenizer),
            similar_words(top, doc.metadata, self.tokenizer),
            "similar",
        )

    # ---- the whole path ------------------------------------------------------------------------
    async def search(self, query: SearchQuery, engine: AsyncReader) -> SearchOutcome:
        """parse (done: ``query``) -> weigh -> retrieve -> re-rank -> present."""
        start = time.perf_counter()
        with self.stage("total"):
            with self.stage("tokenize"):
                weighted = await self.weigh(query, engine)
            depth = self.reranker.candidates(query.k) if self.reranker else query.k
            with self.stage("engine"):
                hits = await engine.search(weighted.weights, k=depth, explain=query.view.explain)
            hits = await self._rerank(weighted, hits, query.k)
            response = await self.present(weighted, hits, query.view)
        return SearchOutcome(self._timed(response, start), hits)

    async def similar(
        self, engine: AsyncReader, doc: TermDocument, k: int, n_terms: int, view: ResultView
    ) -> SearchOutcome:
        """More like ``doc``: its heaviest terms searched for one hit more than wanted, the image
        itself left out (``termindex.base.without_self``), then the same re-rank and presentation
        as a search."""
        start = time.perf_counter()
        weighted = self.similar_query(doc, n_terms)
        depth = self.reranker.candidates(k) if self.reranker else k
        with self.stage("engine"):
            hits = await engine.search(weighted.weights, k=depth + 1, explain=view.explain)
        hits = await self._rerank(weighted, without_self(hits, doc.id, depth), k)
        response = await self.present(weighted, hits, view)
        (has_file,) = await self.have_files([doc.metadata], view)
        response["similar_to"] = {"id": doc.id, **image_fields(doc.id, doc.metadata, has_file, view)}
        return SearchOutcome(self._timed(response, start), hits)

    async def _rerank(self, weighted: WeightedQuery, hits: list[Hit], k: int) -> list[Hit]:
        if self.reranker is None:
            return hits
        with self.stage("rerank"):
            return (await self.reranker.rerank(weighted, hits, k))[:k]

    # ---- present -------------------------------------------------------------------------------
    async def have_files(self, metadata: Sequence[Mapping[str, Any]], view: ResultView) -> list[bool]:
        """Which images have a file to serve (URLs are offered only for those); off the event loop."""
        if not (view.wants("image_url") or view.wants("thumbnail_url")):
            return [False] * len(metadata)
        roots = self.image_roots
        return await anyio.to_thread.run_sync(lambda: [resolve_image(m, roots) is not None for m in metadata])

    async def present(self, weighted: WeightedQuery, hits: list[Hit], view: ResultView) -> dict[str, Any]:
        """``SearchResponse``'s JSON, without ``took_ms``."""
        files = await self.have_files([h.metadata for h in hits], view)
        return {
            "results": [
                hit_to_result(h, self.tokenizer, view, has_file=f, words=weighted.words)
                for h, f in zip(hits, files, strict=True)
            ],
            "query_tokens": weighted.tokens,
            "query_words": weighted.query_words,
            "query_weighting": weighted.weighting,
            "query_weights": [
                {"token": self.tokenizer.id_to_token(t), "weight": w} for t, w in weighted.weights.items()
            ],
        }

    @staticmethod
    def _timed(response: dict[str, Any], start: float) -> dict[str, Any]:
        response["took_ms"] = round((time.perf_counter() - start) * 1000, 3)
        return response
