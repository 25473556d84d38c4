"""Captions through the service's own search pipeline over a real index: what POST /search answers.

The benchmarks of the search path's named choices (``bench/choices.py``) and of the match rule
(``bench/no_match.py``) ask their queries exactly as the service does (its tokenizer, weighting,
engine reader, match rule, reranker and presentation: ``service.search.SearchPipeline``), so their
figures are the service's own, not those of a re-implementation.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

KS = (1, 5, 10)


@dataclass(frozen=True)
class Caption:
    """A query and the indexed image it describes (None: one the index does not hold)."""

    text: str
    target: str | None


def caption_queries(manifest: Path, per_image: int | None = None, described: bool = True) -> list[Caption]:
    """Every caption of a manifest (at most ``per_image`` per image) as a query for its image;
    ``described=False``: for no image of the index."""
    from vsparta.core.manifest import read_manifest

    return [
        Caption(text, record.id if described else None)
        for record in read_manifest(manifest)
        for text in record.captions[:per_image]
    ]


def answers(pipeline: Any, spec: str, queries: Sequence[Any]) -> tuple[list[dict[str, Any]], float]:
    """``SearchPipeline.search`` of each ``SearchQuery`` over the index ``spec`` (opened and warmed up
    first, as the service does); the responses and the mean milliseconds per query."""
    from vsparta.termindex.registry import open_reader

    async def run() -> tuple[list[dict[str, Any]], float]:
        reader = open_reader(spec, 60.0)
        await reader.start()
        try:
            start = time.perf_counter()
            out = [(await pipeline.search(q, reader)).response for q in queries]
            return out, (time.perf_counter() - start) * 1000 / max(1, len(queries))
        finally:
            await reader.close()

    return asyncio.run(run())


def recall(ranked: Sequence[Sequence[str]], captions: Sequence[Caption]) -> dict[str, float]:
    """Recall@K in % of ``ranked`` ids per query (each query's one relevant image: its target)."""
    return {
        f"R@{k}": 100.0
        * sum(c.target in ids[:k] for ids, c in zip(ranked, captions, strict=True))
        / len(captions)
        for k in KS
    }


def result_ids(responses: Sequence[dict[str, Any]]) -> list[list[str]]:
    return [[r["id"] for r in resp["results"]] for resp in responses]


def meta(name: str, seconds: float) -> dict[str, Any]:
    """The command line, the machine and the run's time, for a benchmark's table and JSON."""
    from vsparta.bench import hardware
    from vsparta.bench.options import command_line

    return {"command": command_line(name), "hardware": hardware.describe(), "seconds": round(seconds, 1)}
