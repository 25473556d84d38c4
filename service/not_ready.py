"""The service when its setup is wrong but it must stay up (``VSPARTA_SETUP_ERRORS=not-ready``).

In a container a process that exits on a wrong model or images folder is restarted again and
again, and the reason scrolls away in the log. Instead the service logs the reason once and
serves it: ``/health`` answers (the process is alive), ``/ready`` and every other path answer 503
with the reason and ``Retry-After``, until the folders are fixed and the container restarted.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse


def create_not_ready_app(reason: str, retry_after_s: int) -> FastAPI:
    app = FastAPI(title="VisualSparta image search (not ready)", docs_url=None, redoc_url=None)
    headers = {"Retry-After": str(retry_after_s)}

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.api_route("/{path:path}", methods=["GET", "POST"])
    async def not_ready(request: Request, path: str) -> JSONResponse:
        body = {"status": "not ready", "detail": reason}
        return JSONResponse(body if path == "ready" else {"detail": reason}, status_code=503, headers=headers)

    return app
