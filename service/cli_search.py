"""`vsparta search "query"`: query an index from the command line, without the HTTP service.

The same search pipeline as ``POST /search`` (``vsparta.service.search``), so the same JSON; no torch.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import math
import sys
from typing import Any, TextIO

from pydantic import ValidationError

from vsparta.model.query_tokenizer import QueryTokenizer
from vsparta.service.cli import (
    add_settings_arguments,
    checked_model_path,
    explain_settings_error,
    settings_from_args,
)
from vsparta.service.rerankers.registry import reranker_named
from vsparta.service.results import ResultView
from vsparta.service.search import QueryError, SearchOutcome, SearchPipeline, SearchQuery
from vsparta.service.settings import ServiceSettings
from vsparta.termindex.errors import EngineUnavailable, IndexNotFound, InvalidInput
from vsparta.termindex.registry import open_reader
from vsparta.termindex.weightings.registry import DEFAULT

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("query", help='free text, e.g. "a red circle left of a blue square"')
    add_settings_arguments(parser)
    parser.add_argument("-k", type=int, default=10, help="number of results (default: %(default)s)")
    parser.add_argument("--explain", action="store_true", help="show matched tokens, weights, contributions")
    parser.add_argument("--json", action="store_true", help="print the same JSON as POST /search")
    parser.add_argument(
        "--all-results",
        action="store_true",
        help="also show results that match no informative word (POST /search's require_match: false)",
    )
    parser.add_argument(
        "--min-score", type=float, default=0.0, help="leave out results scoring less (default: 0)"
    )


def word_lines(response: dict[str, Any]) -> list[str]:
    """One line for the query's words in the index: how many images hold each, which are common."""
    stats = response.get("query_word_stats")
    if not stats:
        return []
    parts = [f"{w['word']} {w['images']:,}{' (common)' if w['common'] else ''}" for w in stats]
    return [f"images holding each word (of {response['indexed_images']:,}): {', '.join(parts)}"]


def format_table(response: dict[str, Any], explain: bool, images: list[str]) -> str:
    """A fixed-width table: rank, score, id, image file (and matched tokens with --explain).

    ``images`` are the hits' files as indexed: this machine's own paths, which the JSON (like
    the HTTP answer) never carries.
    """
    results = response["results"]
    head = f"query tokens: {' '.join(response['query_tokens'])}  ({response['took_ms']:.1f} ms)"
    if response.get("query_weighting") not in (None, DEFAULT):  # the weights each contribution used
        weights = ", ".join(f"{w['token']} {w['weight']:.3g}" for w in response.get("query_weights") or [])
        head += f"  weights ({response['query_weighting']}): {weights}"
    lines = [head, *word_lines(response)]
    if not results:
        reason = (response.get("no_match") or {}).get("reason", "")
        return "\n".join([*lines, f"no match: {reason}" if reason else "no results"]) + "\n"
    id_w = max(2, *(len(r["id"]) for r in results))
    lines.append(f"{'#':>3}  {'score':>8}  {'id':<{id_w}}  image")
    for rank, (r, image) in enumerate(zip(results, images, strict=True), 1):
        lines.append(f"{rank:>3}  {r['score']:>8.4f}  {r['id']:<{id_w}}  {image}")
        if explain and r.get("terms"):
            matched = ", ".join(
                f"{t['token']} w={t['weight']:.3g} +{t['contribution']:.3f}" for t in r["terms"]
            )
            lines.append(f"{'':>3}  {'':>8}  {matched}")
    return "\n".join(lines) + "\n"


async def _search_once(
    pipeline: SearchPipeline, query: SearchQuery, settings: ServiceSettings
) -> SearchOutcome:
    """One search through the engine's reader (``start`` opens it, however long that takes)."""
    reader = open_reader(settings.backend, settings.engine_timeout_s, warm=False)
    try:
        await reader.start()
        return await pipeline.search(query, reader)
    finally:
        await reader.close()


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    try:
        settings = settings_from_args(args)
    except ValidationError as exc:
        log.error("invalid settings: %s", explain_settings_error(exc))
        return 2
    if not args.query.strip():
        log.error("the query is empty")
        return 2
    if not 1 <= args.k <= settings.max_k:
        log.error("-k must be between 1 and %d", settings.max_k)
        return 2
    if not (math.isfinite(args.min_score) and args.min_score >= 0):
        log.error("--min-score must be a finite number >= 0")
        return 2
    tokenizer = QueryTokenizer.from_pretrained(
        checked_model_path(args, settings), max_tokens=settings.max_query_tokens
    )
    pipeline = SearchPipeline(
        tokenizer,
        settings.image_roots,
        weighting=settings.query_weights,
        reranker=reranker_named(settings.reranker),
        match=settings.match_rule(tokenizer),
    )
    query = SearchQuery(
        text=args.query,
        k=args.k,
        view=ResultView(explain=args.explain),
        require_match=not args.all_results,
        min_score=args.min_score,
    )
    try:
        outcome = asyncio.run(_search_once(pipeline, query, settings))
    except QueryError as exc:
        log.error("the %s", exc)
        return 2
    except IndexNotFound as exc:  # a user's mistake (wrong path or alias): one sentence, exit 2
        log.error("%s", exc)
        return 2
    except EngineUnavailable as exc:
        log.error("search backend %s unavailable: %s", settings.backend, exc)
        return 3
    except InvalidInput as exc:
        log.error("invalid query: %s", exc)
        return 2
    if args.json:  # the same JSON as POST /search
        out.write(json.dumps(outcome.response, indent=2) + "\n")
    else:
        images = [str(h.metadata.get("image", "")) for h in outcome.hits]
        out.write(format_table(outcome.response, args.explain, images))
    return 0
