"""Plain ASGI middleware: request-size limit and per-request metrics.

Written against ASGI directly (not ``BaseHTTPMiddleware``) so bodies are not copied twice and a
failing handler is still counted as a 500.
"""

from __future__ import annotations

import json
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from vsparta.service.metrics import ServiceMetrics


async def _send_json(send: Send, status: int, payload: dict[str, Any]) -> None:
    body = json.dumps(payload).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


class BodyLimitMiddleware:
    """Answer 413 to a request body over ``max_bytes``, declared (Content-Length) or streamed."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_big = {"detail": f"request body larger than {self.max_bytes} bytes"}
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None:
            try:
                size = int(declared)
            except ValueError:
                await _send_json(send, 400, {"detail": "invalid Content-Length header"})
                return
            if size > self.max_bytes:
                await _send_json(send, 413, too_big)
                return
        if scope.get("method") in {"GET", "HEAD", "OPTIONS"} and declared is None:
            await self.app(scope, receive, send)
            return
        # Read the (small, bounded) body here, then replay it to the app.
        chunks: list[bytes] = []
        total = 0
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            total += len(chunk)
            if total > self.max_bytes:
                await _send_json(send, 413, too_big)
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        replay: list[Message] = [{"type": "http.request", "body": b"".join(chunks), "more_body": False}]

        async def replay_receive() -> Message:
            if replay:
                return replay.pop()
            return await receive()

        await self.app(scope, replay_receive, send)


class MetricsMiddleware:
    """Count requests and time them by route template; exceptions count as 500."""

    def __init__(self, app: ASGIApp, metrics: ServiceMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            route = scope.get("route")
            template = getattr(route, "path_format", None) or (
                "/static" if scope["path"].startswith("/static/") else "unmatched"
            )
            method = scope.get("method", "")
            self.metrics.requests.labels(route=template, method=method, status=str(status)).inc()
            self.metrics.request_latency.labels(route=template, method=method).observe(
                time.perf_counter() - start
            )
