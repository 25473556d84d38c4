"""The HTTP routes. Built per app because the search body's limits come from its settings.

No ``from __future__ import annotations`` here, on purpose: FastAPI reads the handlers'
annotations at runtime, and ``SearchRequest`` is a class made inside ``build_router``, which
string annotations could not name.
"""

import re
import urllib.parse
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any

import anyio.to_thread
from fastapi import APIRouter, Body, Depends, HTTPException, Query, Request
from fastapi import Path as PathParam
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, Response

from vsparta.model.query_tokenizer import QueryTokenizer
from vsparta.service.engines import ServiceEngine
from vsparta.service.images import Thumbnailer, resolve_image
from vsparta.service.metrics import ServiceMetrics
from vsparta.service.results import ResultView, image_fields, top_terms
from vsparta.service.schemas import (
    FIELDS_DESCRIPTION,
    MAX_FIELDS,
    SEARCH_EXAMPLES,
    FieldName,
    Health,
    ImageDetail,
    Message,
    Ready,
    SearchOptions,
    SearchResponse,
    search_request_model,
)
from vsparta.service.search import QueryError, SearchPipeline, SearchQuery
from vsparta.service.settings import ServiceSettings
from vsparta.termindex.base import MAX_ID_LENGTH
from vsparta.termindex.weightings.registry import WEIGHTINGS, weighting_named


def _from_state(attribute: str) -> Callable[[Request], Awaitable[Any]]:
    """A dependency that answers ``app.state.<attribute>`` (the per-app clients the lifespan made).

    ``async`` on purpose: FastAPI runs a plain ``def`` dependency in its threadpool, a thread hop
    per dependency per request for a lookup on ``app.state``.
    """

    async def dependency(request: Request) -> Any:
        return getattr(request.app.state, attribute)

    return dependency


SettingsDep = Annotated[ServiceSettings, Depends(_from_state("settings"))]
EngineDep = Annotated[ServiceEngine, Depends(_from_state("engine"))]
TokenizerDep = Annotated[QueryTokenizer, Depends(_from_state("tokenizer"))]
MetricsDep = Annotated[ServiceMetrics, Depends(_from_state("metrics"))]
PipelineDep = Annotated[SearchPipeline, Depends(_from_state("pipeline"))]
ThumbnailerDep = Annotated[Thumbnailer, Depends(_from_state("thumbnailer"))]

STATIC_DIR = Path(__file__).parent / "static"


def page_examples() -> list[str]:
    """The search page's example queries (its ``?q=`` links): the page is their one home, and the
    checks and benchmarks that ask them read it here."""
    page = (STATIC_DIR / "index.html").read_text(encoding="utf-8")
    return [urllib.parse.unquote_plus(q) for q in re.findall(r'href="\?q=([^"]+)"', page)]


_ERRORS: dict[int | str, dict[str, Any]] = {
    503: {"model": Message, "description": "Search backend unavailable or index missing; see Retry-After."},
}
_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": Message, "description": "No image with that id."}
}
_TOO_BIG: dict[int | str, dict[str, Any]] = {
    413: {"model": Message, "description": "Request body larger than the configured limit."}
}
_NO_FILE: dict[int | str, dict[str, Any]] = {
    404: {"model": Message, "description": "No image with that id, or no readable file for it."}
}
_NOT_JSON: dict[int | str, dict[str, Any]] = {
    415: {"model": Message, "description": "The body is not sent as application/json."}
}
_VOCABULARY_422: dict[str, Any] = {
    "description": "Invalid body: the schema's rules, and also `terms` tokens that are not in the "
    "model's vocabulary (the schema cannot list the vocabulary). A text query with no known or no "
    "informative word is no error: 200 with no results and `no_match` saying why.",
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/HTTPValidationError"}}},
}

# Ids never hold control characters (``vsparta.termindex.base.validate_id``): the schema says so.
DocId = Annotated[
    str,
    PathParam(
        min_length=1,
        max_length=MAX_ID_LENGTH,
        pattern=r"^[^\x00-\x1f\x7f]+$",
        description="Image id: 1 to 512 characters, no control characters.",
    ),
]
Fields = Annotated[list[FieldName] | None, Query(max_length=MAX_FIELDS, description=FIELDS_DESCRIPTION)]


JSON_TYPE = "application/json"


async def require_json(request: Request) -> None:
    """415 naming the type for a body sent as anything but JSON (``curl -d`` sends a form type).

    FastAPI would read such a body as bytes and answer a puzzling 422 "valid dictionary" error.
    """
    media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media != JSON_TYPE and not (media.startswith("application/") and media.endswith("+json")):
        sent = f"Content-Type {media!r}" if media else "no Content-Type"
        raise HTTPException(415, f"the body must be JSON sent as Content-Type: {JSON_TYPE} (got {sent})")


def build_router(settings: ServiceSettings) -> APIRouter:
    search_request = search_request_model(settings)
    router = APIRouter()
    sizes = settings.thumbnail_sizes
    default_size = sizes[len(sizes) // 2]
    roots = settings.image_roots

    @router.post(
        "/search",
        response_model=SearchResponse,
        response_model_exclude_unset=True,
        responses={**_ERRORS, **_TOO_BIG, **_NOT_JSON, 422: _VOCABULARY_422},
        dependencies=[Depends(require_json)],
        tags=["search"],
        summary="Search images by text or weighted tokens",
    )
    async def search(
        body: Annotated[search_request, Body(openapi_examples=SEARCH_EXAMPLES)],  # type: ignore[valid-type]
        engine: EngineDep,
        pipeline: PipelineDep,
    ) -> dict[str, Any]:
        """Rank images by the sum over query tokens of log(1 + weight of the token in the image)."""
        view = ResultView.of(body.explain, body.fields)
        query = SearchQuery(
            body.query,
            body.terms,
            body.k,
            view,
            body.query_weighting,
            require_match=body.require_match,
            min_score=body.min_score,
        )
        try:
            return (await pipeline.search(query, engine)).response
        except QueryError as exc:
            raise RequestValidationError(
                [{"loc": loc, "msg": msg, "type": "value_error"} for loc, msg in exc.errors]
            ) from None

    @router.get(
        "/search/options",
        response_model=SearchOptions,
        tags=["search"],
        summary="The query weightings a search may ask for, and the reranker that runs",
    )
    async def search_options(pipeline: PipelineDep) -> dict[str, Any]:
        """The names and descriptions come from the registries (``termindex.weightings``,
        ``service.rerankers``): the page builds its options from this."""
        reranker = pipeline.reranker
        return {
            "query_weightings": [
                {"name": name, "description": weighting_named(name).description}
                for name in WEIGHTINGS.names()
            ],
            "default_query_weighting": pipeline.weighting.name,
            "reranker": None
            if reranker is None
            else {"name": reranker.name, "description": reranker.description},
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
        pipeline: PipelineDep,
        k: Annotated[int, Query(ge=1, le=settings.max_k)] = settings.default_k,
        explain: bool = False,
        fields: Fields = None,
    ) -> dict[str, Any]:
        """The image's heaviest terms as the query (``TermIndex.similar``), the image itself left out."""
        doc = await engine.get_image(doc_id)
        view = ResultView.of(explain, fields)
        outcome = await pipeline.similar(engine, doc, k, settings.similar_terms, view)
        return outcome.response

    async def _image_path(doc_id: str, engine: Any) -> Path:
        doc = await engine.get_image(doc_id)
        path = await anyio.to_thread.run_sync(resolve_image, doc.metadata, roots)
        if path is None:
            raise HTTPException(404, "no image file for this id under the configured image roots")
        return path

    @router.get(
        "/images/{doc_id:path}/file",
        response_class=FileResponse,
        responses={**_ERRORS, **_NO_FILE, 200: {"content": {"image/*": {}}, "description": "The image."}},
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
            **_NO_FILE,
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
        pipeline: PipelineDep,
        top: Annotated[int, Query(ge=1, le=settings.top_terms)] = settings.top_terms,
    ) -> dict[str, Any]:
        doc = await engine.get_image(doc_id)
        (has_file,) = await pipeline.have_files([doc.metadata], ResultView())
        return {
            "id": doc.id,
            **image_fields(doc.id, doc.metadata, has_file, ResultView()),
            "terms": top_terms(doc.weights, tokenizer, top),
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
    async def ready(engine: EngineDep, settings: SettingsDep, pipeline: PipelineDep) -> Any:
        ok, detail = await engine.ready()
        if ok:  # a ready service also says how it weighs query words and how many have own floors
            return {
                "status": "ready",
                "detail": detail,
                "query_weights": pipeline.weighting.name,
                "term_floors": len(pipeline.match.word_floors),
            }
        return Response(
            Ready(status="not ready", detail=detail).model_dump_json(exclude_none=True),
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

    @router.api_route("/", methods=["GET", "HEAD"], response_class=HTMLResponse, include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html", media_type="text/html")

    return router
