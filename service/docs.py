"""API docs served offline: Swagger UI 5 at ``/docs``, ReDoc at ``/redoc``, and the site icon.

FastAPI's default pages pull their scripts from a CDN, which a machine without internet cannot
reach. The assets come from the ``fastapi-offline`` package (Swagger UI 5.x, which reads the
OpenAPI 3.1 documents FastAPI writes; Swagger UI 4 cannot). To update them, raise its version
in ``pyproject.toml``; ``tests/service/test_service_docs.py`` checks the Swagger UI major version.
"""

from __future__ import annotations

import re
from pathlib import Path

import fastapi_offline
from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse
from fastapi.staticfiles import StaticFiles

DOCS_ASSETS = Path(fastapi_offline.__file__).parent / "static"
FAVICON = Path(__file__).parent / "static" / "favicon.ico"
ASSETS_URL = "/docs-assets"


def swagger_ui_version() -> str:
    """The bundled Swagger UI's version, read from the script itself (what a browser will run)."""
    text = (DOCS_ASSETS / "swagger-ui-bundle.js").read_text(encoding="utf-8", errors="replace")
    found = re.search(r'PACKAGE_VERSION:"(\d+\.\d+\.\d+)"', text)
    return found.group(1) if found else "unknown"


def add_offline_docs(app: FastAPI) -> None:
    """Mount the assets and add /docs, /redoc and /favicon.ico (none of them in the schema)."""
    app.mount(ASSETS_URL, StaticFiles(directory=DOCS_ASSETS), name="docs-assets")
    openapi_url = app.openapi_url or "/openapi.json"

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url,
            title=f"{app.title} - API docs",
            swagger_js_url=f"{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url="/favicon.ico",
            swagger_ui_parameters={"tryItOutEnabled": False, "displayRequestDuration": True},
        )

    @app.get("/redoc", include_in_schema=False)
    async def redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url=openapi_url,
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{ASSETS_URL}/redoc.standalone.js",
            redoc_favicon_url="/favicon.ico",
            with_google_fonts=False,  # offline: no font CDN
        )

    @app.get("/favicon.ico", include_in_schema=False)
    async def favicon() -> FileResponse:
        return FileResponse(
            FAVICON, media_type="image/x-icon", headers={"Cache-Control": "public, max-age=86400"}
        )
