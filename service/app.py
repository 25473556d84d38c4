"""The FastAPI app: ``create_app(settings)``; clients live on ``app.state`` for the app's lifetime."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from fastapi.staticfiles import StaticFiles

from vsparta.model.query_tokenizer import QueryTokenizer
from vsparta.service.docs import add_offline_docs
from vsparta.service.engines import DropClientFailures, OutageLog, client_loggers, open_engine
from vsparta.service.errors import install_error_handlers
from vsparta.service.images import Thumbnailer
from vsparta.service.metrics import ServiceMetrics
from vsparta.service.middleware import BodyLimitMiddleware, MetricsMiddleware
from vsparta.service.rerankers.base import Reranker
from vsparta.service.rerankers.registry import reranker_named
from vsparta.service.routes import STATIC_DIR, build_router
from vsparta.service.search import SearchPipeline
from vsparta.service.settings import ServiceSettings
from vsparta.termindex.scoring import TEXT as SATURATION
from vsparta.termindex.weightings.base import QueryWeighting

log = logging.getLogger(__name__)

DESCRIPTION = f"""
Text-to-image search with VisualSparta: every image was turned offline into a weighted bag of
word-pieces; a query is only tokenized (no neural network runs here) and matched on an inverted
index. Score = sum over query tokens of query weight x {SATURATION} (weight: the token's in the
image; query weight: how often the token occurs in the query by default, or another registered
weighting (`query_weights`, `GET /search/options`); each response says which and lists them).
"""


def create_app(
    settings: ServiceSettings,
    *,
    weighting: QueryWeighting | None = None,
    reranker: Reranker | None = None,
) -> FastAPI:
    """A new app with its own metrics registry; the lifespan opens the tokenizer and engine.

    ``weighting`` and ``reranker`` are the search pipeline's hooks (``vsparta.service.search``);
    without them, the settings' ``query_weights`` and ``reranker`` (names in their registries)
    choose.
    """
    outage = OutageLog()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        quiet = DropClientFailures()
        loggers = client_loggers()
        for logger in loggers:
            logger.addFilter(quiet)
        app.state.tokenizer = QueryTokenizer.from_pretrained(
            settings.model_path, max_tokens=settings.max_query_tokens
        )
        app.state.pipeline = SearchPipeline(
            app.state.tokenizer,
            settings.image_roots,
            weighting=settings.query_weights if weighting is None else weighting,
            reranker=reranker_named(settings.reranker) if reranker is None else reranker,
            match=settings.match_rule(app.state.tokenizer),
            stage_latency=app.state.metrics.stage_latency,
        )
        app.state.engine = open_engine(settings.backend, settings.engine_timeout_s, outage)
        app.state.thumbnailer = Thumbnailer(settings.thumbnail_cache_dir, settings.thumbnail_sizes)
        await app.state.engine.start()
        ok, detail = await app.state.engine.ready()
        log.info("backend %s: %s%s", settings.backend, "ready, " if ok else "NOT ready: ", detail)
        try:
            yield
        finally:
            for logger in loggers:
                logger.removeFilter(quiet)
            await app.state.engine.close()
            app.state.thumbnailer.close()

    app = FastAPI(
        title="VisualSparta image search",
        version="0.1.0",
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,  # served below from local assets: FastAPI's default pulls them from a CDN
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.metrics = ServiceMetrics()
    install_error_handlers(app, settings.retry_after_s, outage)
    app.include_router(build_router(settings))
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    add_offline_docs(app)
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=["GET", "POST"],
            allow_headers=["*"],
        )
    # Added last = outermost: metrics see every answer, including the body limit's 413.
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes)
    app.add_middleware(MetricsMiddleware, metrics=app.state.metrics)
    return app
