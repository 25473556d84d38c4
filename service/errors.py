"""Map engine errors to HTTP answers: short messages, never a stack trace to the client.

Every 422 has the same body, ``{"detail": [{"loc", "msg", "type"}, ...]}`` (the schema's
``HTTPValidationError``), whether pydantic or an engine found the problem. Engine outages are
logged through the app's ``OutageLog``: the first failure, a summary per interval, the recovery.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from vsparta.service.engines import OutageLog, public_reason
from vsparta.termindex.errors import DocumentNotFound, InvalidInput, TermIndexError

log = logging.getLogger(__name__)


def unavailable(retry_after_s: int, detail: str) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=503, headers={"Retry-After": str(retry_after_s)})


def invalid(errors: list[dict[str, Any]]) -> JSONResponse:
    return JSONResponse({"detail": errors}, status_code=422)


def install_error_handlers(app: FastAPI, retry_after_s: int, outage: OutageLog) -> None:
    def where(request: Request) -> str:
        return f"{request.method} {request.url.path}"

    async def engine_failed(request: Request, exc: Exception) -> JSONResponse:
        # Outages, a missing index, and failures no subclass names (e.g. an Elasticsearch 500):
        # the backend's fault, so 503; the log gets the engine's message, the client its kind.
        outage.failed(where(request), exc)
        return unavailable(retry_after_s, public_reason(exc))

    async def invalid_input(request: Request, exc: Exception) -> JSONResponse:
        return invalid([{"loc": ["body"], "msg": str(exc), "type": "value_error"}])

    async def not_found(request: Request, exc: Exception) -> JSONResponse:
        return JSONResponse({"detail": "no image with that id"}, status_code=404)

    async def validation(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        # pydantic's messages name the field and the rule; drop echoed inputs and internal context.
        return invalid(
            [
                {"loc": list(e.get("loc", ())), "msg": e.get("msg", "invalid"), "type": e.get("type", "")}
                for e in exc.errors()
            ]
        )

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        if exc.status_code == 400 and isinstance(exc.__cause__, RecursionError):
            # json.loads gives up on deep nesting ([[[[...]]]]): a body error like the others.
            msg = "body is not valid JSON: nested too deeply"
            return invalid([{"loc": ["body"], "msg": msg, "type": "json_invalid"}])
        if exc.status_code == 400 and isinstance(exc.__cause__, ValueError):
            # FastAPI's "error parsing the body" (e.g. not UTF-8): the same 422 as invalid JSON.
            return invalid(
                [{"loc": ["body"], "msg": f"body is not valid JSON: {exc.__cause__}", "type": "json_invalid"}]
            )
        return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers)

    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s", where(request), exc_info=exc)
        return JSONResponse({"detail": "internal server error"}, status_code=500)

    app.add_exception_handler(InvalidInput, invalid_input)
    app.add_exception_handler(DocumentNotFound, not_found)
    app.add_exception_handler(TermIndexError, engine_failed)
    app.add_exception_handler(RequestValidationError, validation)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(Exception, unexpected)
