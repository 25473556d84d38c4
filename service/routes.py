"""The HTTP routes. Built per app because the search body's limits come from its settings.

No ``from __future__ import annotations`` here, on purpose: FastAPI reads the handlers'
annotations at runtime, and ``SearchRequest`` is a class made inside ``build_router``, which
string annotations could not name.
"""

import time
from pathlib import Path
from typing import Annotated, Any

import anyio.to_thread
from fastapi import APIRouter, Body, HTTPException, Query
from fastapi import Path as PathParam
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, Response

from service.deps import EngineDep, MetricsDep, SettingsDep, ThumbnailerDep, TokenizerDep
from service.images import resolve_image
from service.results import hit_to_result, image_urls, query_from_text, top_terms
from service.schemas import (
    SEARCH_EXAMPLES,
    Health,
    ImageDetail,
    Message,
    Ready,
    SearchResponse,
    search_request_model,
)
from service.settings import ServiceSettings
from termindex.base import MAX_ID_LENGTH

STATIC_DIR = Path(__file__).parent / "static"

_ERRORS: dict[int | str, dict[str, Any]] = {
    503: {"model": Message, "description": "Search backend unavailable or index missing; see Retry-After."},
}
_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": Message, "description": "No image with that id."}
}

DocId = Annotated[str, PathParam(min_length=1, max_length=MAX_ID_LENGTH, description="Image id.")]


def _invalid(loc: tuple[str | int, ...], msg: str) -> RequestValidationError:
    return RequestValidationError([{"loc": loc, "msg": msg, "type": "value_error"}])


def build_router(settings: ServiceSettings) -> APIRouter:
    search_request = search_request_model(settings)
    router = APIRouter()
    sizes = settings.thumbnail_sizes
    default_size = sizes[len(sizes) // 2]

    @router.post(
        "/search",
        response_model=SearchResponse,
        response_model_exclude_unset=True,
        responses=_ERRORS,
        tags=["search"],
        summary="Search images by text or weighted tokens",
    )
    async def search(
        body: Annotated[search_request, Body(openapi_examples=SEARCH_EXAMPLES)],  # type: ignore[valid-type]
        engine: EngineDep,
        tokenizer: TokenizerDep,
        metrics: MetricsDep,
    ) -> dict[str, Any]:
        """Rank images by the sum over query tokens of log(1 + weight of the token in the image)."""
        start = time.perf_counter()
        with metrics.stage("total"):
            with metrics.stage("tokenize"):
                if body.query is not None:
                    query, tokens = query_from_text(body.query, tokenizer)
                    if not query:
                        raise _invalid(
                            ("body", "query"), "query has no searchable words (none in the vocabulary)"
                        )
                else:
                    unknown = [t for t in body.terms if tokenizer.token_to_id(t) is None]
                    if unknown:
                        raise RequestValidationError(
                            [
                                {
                                    "loc": ("body", "terms", t),
                                    "msg": f"unknown token {t!r}: not in the model's vocabulary",
                                    "type": "value_error",
                                }
                                for t in unknown
                            ]
                        )
                    query = tokenizer.terms_to_ids(body.terms)
                    tokens = list(body.terms)
            with metrics.stage("engine"):
                hits = await engine.search(query, k=body.k, explain=body.explain)
            results = [hit_to_result(h, tokenizer, body.explain) for h in hits]
        return {
            "results": results,
            "query_tokens": tokens,
            "took_ms": round((time.perf_counter() - start) * 1000, 3),
        }

    @router.get(
        "/images/{doc_id:path}/similar",
        response_model=SearchResponse,
        response_model_exclude_unset=True,
        responses={**_ERRORS, **_NOT_FOUND},
        tags=["images"],
        summary="More like this: images sharing this image's heaviest terms",
    )
    async def similar(
        doc_id: DocId,
        engine: EngineDep,
        tokenizer: TokenizerDep,
        metrics: MetricsDep,
        k: Annotated[int, Query(ge=1, le=settings.max_k)] = settings.default_k,
        explain: bool = False,
    ) -> dict[str, Any]:
        start = time.perf_counter()
        with metrics.stage("engine"):
            doc = await engine.get(doc_id)
            top = sorted(doc.terms.items(), key=lambda kv: (-kv[1], kv[0]))[: settings.similar_terms]
            hits = await engine.search(dict(top), k=k + 1, explain=explain)
        results = [hit_to_result(h, tokenizer, explain) for h in hits if h.id != doc_id][:k]
        return {
            "results": results,
            "query_tokens": [tokenizer.id_to_token(t) for t, _ in top],
            "took_ms": round((time.perf_counter() - start) * 1000, 3),
        }

    async def _image_path(doc_id: str, engine: Any) -> Path:
        doc = await engine.get(doc_id)
        path = resolve_image(doc.metadata, settings.image_roots)
        if path is None:
            raise HTTPException(404, "no image file for this id under the configured image roots")
        return path

    @router.get(
        "/images/{doc_id:path}/file",
        response_class=FileResponse,
        responses={**_ERRORS, **_NOT_FOUND, 200: {"content": {"image/*": {}}, "description": "The image."}},
        tags=["images"],
        summary="The original image file",
    )
    async def image_file(doc_id: DocId, engine: EngineDep) -> FileResponse:
        path = await _image_path(doc_id, engine)
        return FileResponse(
            path, headers={"Cache-Control": "public, max-age=300", "X-Content-Type-Options": "nosniff"}
        )

    @router.get(
        "/images/{doc_id:path}/thumbnail",
        response_class=FileResponse,
        responses={
            **_ERRORS,
            **_NOT_FOUND,
            200: {"content": {"image/jpeg": {}}, "description": "JPEG thumbnail."},
        },
        tags=["images"],
        summary="A cached JPEG thumbnail (size rounded up to a configured size)",
    )
    async def image_thumbnail(
        doc_id: DocId,
        engine: EngineDep,
        thumbnailer: ThumbnailerDep,
        size: Annotated[int, Query(ge=16, le=sizes[-1])] = default_size,
    ) -> FileResponse:
        path = await _image_path(doc_id, engine)
        thumb = await anyio.to_thread.run_sync(thumbnailer.thumbnail, path, size)
        if thumb is None:
            raise HTTPException(404, "image file is unreadable")
        return FileResponse(
            thumb,
            media_type="image/jpeg",
            headers={"Cache-Control": "public, max-age=300", "X-Content-Type-Options": "nosniff"},
        )

    # Declared after /similar, /file and /thumbnail: ids may contain '/', and this route's
    # path parameter would otherwise swallow those suffixes.
    @router.get(
        "/images/{doc_id:path}",
        response_model=ImageDetail,
        responses={**_ERRORS, **_NOT_FOUND},
        tags=["images"],
        summary="An image's metadata and heaviest terms",
    )
    async def image_detail(
        doc_id: DocId,
        engine: EngineDep,
        tokenizer: TokenizerDep,
        top: Annotated[int, Query(ge=1, le=settings.top_terms)] = settings.top_terms,
    ) -> dict[str, Any]:
        doc = await engine.get(doc_id)
        image_url, thumbnail_url = image_urls(doc.id, doc.metadata)
        return {
            "id": doc.id,
            "metadata": dict(doc.metadata),
            "image_url": image_url,
            "thumbnail_url": thumbnail_url,
            "terms": top_terms(doc.terms, tokenizer, top),
        }

    @router.get(
        "/health", response_model=Health, tags=["operations"], summary="Liveness: the process answers"
    )
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @router.get(
        "/ready",
        response_model=Ready,
        responses={503: {"model": Ready, "description": "Engine unreachable or index missing."}},
        tags=["operations"],
        summary="Readiness: engine reachable and index present",
    )
    async def ready(engine: EngineDep, settings: SettingsDep) -> Any:
        ok, detail = await engine.ready()
        if ok:
            return {"status": "ready", "detail": detail}
        return Response(
            Ready(status="not ready", detail=detail).model_dump_json(),
            status_code=503,
            media_type="application/json",
            headers={"Retry-After": str(settings.retry_after_s)},
        )

    @router.get(
        "/metrics",
        response_class=Response,
        responses={200: {"content": {"text/plain": {}}, "description": "Prometheus text format."}},
        tags=["operations"],
        summary="Prometheus metrics: request counts, latency per stage",
    )
    async def metrics_route(metrics: MetricsDep) -> Response:
        return Response(metrics.render(), media_type=metrics.content_type)

    @router.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html", media_type="text/html")

    return router
