"""Request dependencies: the per-app clients the lifespan put on ``app.state``.

``async`` on purpose: FastAPI runs a plain ``def`` dependency in its threadpool, a thread hop per
dependency per request for a lookup on ``app.state``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import Depends, Request

from vsparta.model.query_tokenizer import QueryTokenizer
from vsparta.service.engines import ServiceEngine
from vsparta.service.images import Thumbnailer
from vsparta.service.metrics import ServiceMetrics
from vsparta.service.search import SearchPipeline
from vsparta.service.settings import ServiceSettings


def _from_state(attribute: str) -> Callable[[Request], Awaitable[Any]]:
    """A dependency that answers ``app.state.<attribute>``."""

    async def dependency(request: Request) -> Any:
        return getattr(request.app.state, attribute)

    return dependency


SettingsDep = Annotated[ServiceSettings, Depends(_from_state("settings"))]
EngineDep = Annotated[ServiceEngine, Depends(_from_state("engine"))]
TokenizerDep = Annotated[QueryTokenizer, Depends(_from_state("tokenizer"))]
MetricsDep = Annotated[ServiceMetrics, Depends(_from_state("metrics"))]
PipelineDep = Annotated[SearchPipeline, Depends(_from_state("pipeline"))]
ThumbnailerDep = Annotated[Thumbnailer, Depends(_from_state("thumbnailer"))]
