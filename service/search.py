"""The one search pipeline: parse -> tokenize and weight -> retrieve -> re-rank (optional) -> present.

``POST /search``, ``GET /images/{id}/similar`` and ``vsparta search`` all run it, so a response is
built in one place and a new stage is added once. Each step is a method or a hook:

- **parse** (``SearchQuery``): what was asked, already checked against the schema's limits.
- **tokenize and weight** (``SearchPipeline.weigh``): a text becomes vocabulary ids with their
  counts, then a ``QueryWeighting`` (``termindex.weightings``: ``counts`` by default, the paper's
  rule; ``idf``, ``saturated``, ...; the service's choice or the request's ``query_weights``)
  turns counts into the weights the engine is sent, with the index's own document frequencies when
  it asks for them (``AsyncReader.term_statistics``, cached per index version by the engines that
  need a request). Explicit ``terms`` are the client's own weights and are not re-weighted. The
  response names the weighting and lists the weights sent, so a reader can tell how each
  contribution came about.
- **retrieve**: any ``termindex.reader.AsyncReader`` (the service's, behind its timeout:
  ``service.engines.ServiceEngine``; the command line's, bare). "More like this" is a search for
  k + 1 of the image's heaviest terms (``termindex.base.similar_query``) without the image itself,
  on the document the route already fetched.
- **re-rank**: an optional ``Reranker`` (``service.rerankers``: ``--reranker``); none by default.
- **present**: ``vsparta.service.results`` turns hits into the JSON of ``SearchResponse``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio.to_thread
import numpy as np

from vsparta.model.query_tokenizer import QueryTokenizer
from vsparta.service.images import resolve_image
from vsparta.service.matching import (
    MatchRule,
    QueryCounts,
    Word,
    count_words,
    select,
    to_test,
    with_verdicts,
    words_of,
)
from vsparta.service.presence import Presence, Verdict, verdicts
from vsparta.service.rerankers.base import Reranker
from vsparta.service.results import (
    ResultView,
    caption_words,
    describe,
    hit_to_result,
    image_fields,
    similar_words,
)
from vsparta.termindex import Hit, TermDocument
from vsparta.termindex.base import TermStatistics, similar_query, without_self
from vsparta.termindex.reader import AsyncReader
from vsparta.termindex.weightings.base import QueryWeighting
from vsparta.termindex.weightings.registry import DEFAULT, weighting_named

if TYPE_CHECKING:
    from prometheus_client import Histogram

# With the match rule on, the engine is asked for at least this many times the results wanted
# (a reranker may want more): the rule leaves out the ones that match no informative word, and the
# ones behind them move up.
MATCH_DEPTH = 2


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
    weighting: str | None = None  # a registered query weighting; None: the service's
    require_match: bool = True  # leave out results that match no informative word (service.matching)
    min_score: float = 0.0  # leave out results scoring less


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
    weighting: str = DEFAULT  # how ``weights`` were made: a weighting's name, "terms", "similar"
    counts: QueryCounts | None = None  # what the index holds of the words (not for "similar")


@dataclass
class SearchOutcome:
    """The response (``SearchResponse``'s JSON) and the hits it was made of (for local display)."""

    response: dict[str, Any]
    hits: list[Hit]


def apply_weighting(
    rule: QueryWeighting, counts: Mapping[int, float], stats: TermStatistics | None
) -> dict[int, float]:
    """``{id: weight}`` of one query's ``{id: count}`` under ``rule`` (the evaluation applies the
    same ``rule.weigh`` to every query's arrays at once: ``model.evaluate.weighted_queries``)."""
    ids = list(counts)
    values = np.fromiter((counts[t] for t in ids), dtype=np.float64, count=len(ids))
    df = None if stats is None else np.fromiter((stats.df.get(t, 0) for t in ids), np.int64, len(ids))
    weights = rule.weigh(values, df, 0 if stats is None else stats.n_docs)
    return dict(zip(ids, np.asarray(weights, dtype=np.float64).tolist(), strict=True))


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
        weighting: QueryWeighting | str = DEFAULT,
        reranker: Reranker | None = None,
        match: MatchRule | None = None,
        stage_latency: Histogram | None = None,
    ) -> None:
        self.tokenizer = tokenizer
        self.image_roots = list(image_roots)
        self.weighting = weighting_named(weighting) if isinstance(weighting, str) else weighting
        self.reranker = reranker
        self.match = match or MatchRule()
        self.stage_latency = stage_latency
        self._verdicts: dict[tuple[str, int, str, int, Presence], Verdict] = {}  # per index version and size

    def stage(self, name: str) -> AbstractContextManager[Any]:
        """Times one stage into ``stage_latency`` (the service's ``ServiceMetrics``), if given."""
        if self.stage_latency is None:
            return contextlib.nullcontext()
        return self.stage_latency.labels(stage=name).time()

    # ---- tokenize and weight -----------------------------------------------------------------
    async def weigh(self, query: SearchQuery, engine: AsyncReader) -> WeightedQuery:
        """The engine query of a parsed search and what the index holds of its words (``QueryError``
        for explicit ``terms`` outside the vocabulary; a text without a known word has no weights).
        The request's ``query_weighting`` (``SearchQuery.weighting``) wins over the service's."""
        if query.text is not None:
            counts, tokens = query_from_text(query.text, self.tokenizer)
            stats = await self._statistics(engine, counts)
            rule = weighting_named(query.weighting) if query.weighting else self.weighting
            weights = apply_weighting(rule, counts, stats) if counts else {}
            how = rule.name
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
            stats = await self._statistics(engine, weights)
        words = words_of(tokens)
        ids_of = {self.tokenizer.id_to_token(t): t for t in weights}
        held = count_words(words, ids_of, stats, self.match)
        if tests := to_test(held, self.match):
            held = with_verdicts(held, await self._tested(engine, tests, stats), self.match)
        return WeightedQuery(weights, tokens, words, [w.text for w in words], how, held)

    async def _statistics(self, engine: AsyncReader, ids: Iterable[int]) -> TermStatistics:
        """The index's counts for the query's tokens: every answer lists them per word, the match
        rule and a weighting such as ``idf`` read them. A query without tokens asks only the size."""
        with self.stage("statistics"):
            wanted = sorted(ids)
            if wanted:
                return await engine.term_statistics(wanted)
            return TermStatistics(await engine.count(), {})

    async def _tested(
        self, engine: AsyncReader, tests: dict[str, tuple[int, Presence]], stats: TermStatistics
    ) -> dict[str, Verdict]:
        """The presence test of each calibrated word (``service.presence``), remembered per index
        version and size when the engine names a version (a new version, or documents written into
        the same one, ask again)."""
        keys = {w: (stats.version, stats.n_docs, w, *tests[w]) for w in tests}
        ask = {w: t for w, t in tests.items() if not stats.version or keys[w] not in self._verdicts}
        with self.stage("presence"):
            rule = self.match
            found = (
                await verdicts(
                    engine,
                    ask,
                    stats.n_docs,
                    rule.presence_alpha,
                    rule.presence_ratio,
                    rule.presence_joint,
                    rule.presence_predictive,
                )
                if ask
                else {}
            )
        if stats.version:
            if len(self._verdicts) > 100_000:
                self._verdicts.clear()
            self._verdicts.update({keys[w]: v for w, v in found.items()})
        return {w: found[w] if w in found else self._verdicts[keys[w]] for w in tests}

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
            wanted = self.reranker.candidates(query.k) if self.reranker else query.k
            depth = max(wanted, MATCH_DEPTH * query.k if query.require_match else 0)
            hits: list[Hit] = []
            if weighted.weights:  # with explanations: the match rule reads each hit's tokens
                with self.stage("engine"):
                    hits = await engine.search(weighted.weights, k=depth, explain=True)
            counts, strict, floor = weighted.counts, query.require_match, query.min_score
            assert counts is not None  # weigh counts every search's words
            selected = select(hits, counts, self.match, require_match=strict, min_score=floor)
            shown = await self._rerank(weighted, selected, query.k)
            response = await self.present(weighted, shown, query.view)
            response |= describe(
                hits, selected, shown, counts, self.match, require_match=strict, min_score=floor
            )
        return SearchOutcome(self._timed(response, start), shown)

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
            hits = await engine.search(weighted.weights, k=depth + 1, explain=True)
        hits = await self._rerank(weighted, without_self(hits, doc.id, depth), k)
        response = await self.present(weighted, hits, view)
        (has_file,) = await self.have_files([doc.metadata], view)
        response["similar_to"] = {"id": doc.id, **image_fields(doc.id, doc.metadata, has_file, view)}
        return SearchOutcome(self._timed(response, start), hits)

    async def _rerank(self, weighted: WeightedQuery, hits: list[Hit], k: int) -> list[Hit]:
        if self.reranker is None:
            return hits[:k]
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
            **({"reranker": self.reranker.name} if self.reranker is not None else {}),
        }

    @staticmethod
    def _timed(response: dict[str, Any], start: float) -> dict[str, Any]:
        response["took_ms"] = round((time.perf_counter() - start) * 1000, 3)
        return response
