"""Map engine errors to HTTP answers: short messages, never a stack trace to the client."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from termindex.errors import DocumentNotFound, EngineUnavailable, IndexNotFound, InvalidInput

log = logging.getLogger(__name__)


def unavailable(retry_after_s: int, detail: str) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=503, headers={"Retry-After": str(retry_after_s)})


def install_error_handlers(app: FastAPI, retry_after_s: int) -> None:
    async def engine_unavailable(request: Request, exc: Exception) -> JSONResponse:
        log.warning("%s %s: search engine unavailable: %s", request.method, request.url.path, exc)
        return unavailable(retry_after_s, "search backend unavailable, retry later")

    async def index_not_found(request: Request, exc: Exception) -> JSONResponse:
        log.warning("%s %s: index not found: %s", request.method, request.url.path, exc)
        return unavailable(retry_after_s, "search index not found: nothing indexed yet, or wrong index name")

    async def invalid_query(request: Request, exc: Exception) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=422)

    async def not_found(request: Request, exc: Exception) -> JSONResponse:
        return JSONResponse({"detail": "no image with that id"}, status_code=404)

    async def validation(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        # pydantic's messages name the field and the rule; drop echoed inputs and internal context.
        errors = [
            {"loc": list(e.get("loc", ())), "msg": e.get("msg", "invalid"), "type": e.get("type", "")}
            for e in exc.errors()
        ]
        return JSONResponse({"detail": errors}, status_code=422)

    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
        return JSONResponse({"detail": "internal server error"}, status_code=500)

    app.add_exception_handler(EngineUnavailable, engine_unavailable)
    app.add_exception_handler(IndexNotFound, index_not_found)
    app.add_exception_handler(InvalidInput, invalid_query)
    app.add_exception_handler(DocumentNotFound, not_found)
    app.add_exception_handler(RequestValidationError, validation)
    app.add_exception_handler(Exception, unexpected)
