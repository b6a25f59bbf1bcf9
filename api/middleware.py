"""ASGI middleware: a cap on request body size (413 before the body reaches a handler),
and the request-latency metric."""

from __future__ import annotations

import json
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .metrics import Metrics

IMPORT_PATH = "/v1/records/import"
JOBS_PATH = "/v1/jobs"  # a multipart post there uploads a model


async def _reply(send: Send, status: int, detail: str) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def is_multipart(scope: Scope) -> bool:
    """Whether the request's body is ``multipart/form-data`` (a model upload on /v1/jobs)."""
    content_type = dict(scope.get("headers", ())).get(b"content-type", b"")
    return content_type.lower().startswith(b"multipart/form-data")


class BodyLimit:
    """Reject bodies over ``limit`` bytes (``import_limit`` for record imports,
    ``model_limit`` for model uploads) with 413.
    The body is read here, up to the limit, and handed on whole."""

    def __init__(self, app: ASGIApp, limit: int, import_limit: int, model_limit: int) -> None:
        self.app = app
        self.limit = limit
        self.import_limit = import_limit
        self.model_limit = model_limit

    def _limit(self, scope: Scope) -> int:
        if scope["path"] == IMPORT_PATH:
            return self.import_limit
        if scope["path"] == JOBS_PATH and is_multipart(scope):
            return self.model_limit
        return self.limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers", ()))
        limit = self._limit(scope)
        too_big = f"request body over the limit of {limit} bytes"
        try:
            declared = int(headers.get(b"content-length", b"0"))
        except ValueError:
            await _reply(send, 400, "malformed Content-Length header")
            return
        if declared > limit:
            await _reply(send, 413, too_big)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                await _reply(send, 413, too_big)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


class RequestTimer:
    """Observe each request's time to its response's first byte, by route template."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()

        async def timed_send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                route = scope.get("route")
                path = getattr(route, "path", "unmatched")
                self.metrics.requests.labels(scope["method"], path, str(message["status"])) \
                    .observe(time.perf_counter() - start)
            await send(message)

        await self.app(scope, receive, timed_send)
