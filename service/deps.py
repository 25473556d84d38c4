"""Request dependencies: the per-app clients the lifespan put on ``app.state``.

``async`` on purpose: FastAPI runs a plain ``def`` dependency in its threadpool, a thread hop per
dependency per request for a lookup on ``app.state``.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from vsparta.model.query_tokenizer import QueryTokenizer
from vsparta.service.engines import ServiceEngine
from vsparta.service.images import Thumbnailer
from vsparta.service.metrics import ServiceMetrics
from vsparta.service.search import SearchPipeline
from vsparta.service.settings import ServiceSettings


async def get_settings(request: Request) -> ServiceSettings:
    return request.app.state.settings


async def get_engine(request: Request) -> ServiceEngine:
    return request.app.state.engine


async def get_tokenizer(request: Request) -> QueryTokenizer:
    return request.app.state.tokenizer


async def get_metrics(request: Request) -> ServiceMetrics:
    return request.app.state.metrics


async def get_pipeline(request: Request) -> SearchPipeline:
    return request.app.state.pipeline


async def get_thumbnailer(request: Request) -> Thumbnailer:
    return request.app.state.thumbnailer


SettingsDep = Annotated[ServiceSettings, Depends(get_settings)]
EngineDep = Annotated[ServiceEngine, Depends(get_engine)]
TokenizerDep = Annotated[QueryTokenizer, Depends(get_tokenizer)]
MetricsDep = Annotated[ServiceMetrics, Depends(get_metrics)]
PipelineDep = Annotated[SearchPipeline, Depends(get_pipeline)]
ThumbnailerDep = Annotated[Thumbnailer, Depends(get_thumbnailer)]
