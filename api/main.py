"""The FastAPI app: everything under ``/api/v1``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio.to_thread
from fastapi import APIRouter, FastAPI, Request, status
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api import ui
from api.events import close_subscriptions
from api.routes import campaigns, dashboard, families, library, shapesets, system
from core import families as stored_families
from core import feed
from core.queues import publish_events
from core.settings import get_settings

API_PREFIX = "/api/v1"

#: Threads serving the synchronous endpoints: fewer than the database pool holds connections
#: (core/db.py: 10 + 20 overflow). With more threads than connections, a burst of requests can
#: take every thread while waiting for a connection that only a request's teardown (which needs
#: a thread) would give back: the API stalls until the pool's timeout.
API_THREADS = 24


@asynccontextmanager
async def _lifespan(_app: FastAPI) -> AsyncIterator[None]:
    anyio.to_thread.current_default_thread_limiter().total_tokens = API_THREADS
    # the events this process writes (a campaign created, cancelled, given actions) reach the
    # event streams of every API process through Redis
    feed.set_publisher(publish_events)
    try:
        yield
    finally:
        feed.set_publisher(None)
        await close_subscriptions()


def create_app() -> FastAPI:
    """The REST API (campaigns, families, history, workers, health, metrics)."""
    # the campaigns of a team's own family name it by content key: found in this database
    stored_families.install(get_settings().effective_database_url)
    app = FastAPI(title="tuneforge", version="0.1.0",
                  summary="Auto-tunes CUDA kernels with an agent in a closed loop.",
                  docs_url=f"{API_PREFIX}/docs", openapi_url=f"{API_PREFIX}/openapi.json",
                  lifespan=_lifespan)
    v1 = APIRouter(prefix=API_PREFIX)
    v1.include_router(campaigns.router)
    v1.include_router(families.router)
    v1.include_router(shapesets.router)
    v1.include_router(library.router)
    v1.include_router(system.router)
    v1.include_router(dashboard.router)
    app.include_router(v1)
    ui.install(app)  # the web dashboard under /ui
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_middleware(BodyLimit, limit=get_settings().max_body_bytes)
    return app


class BodyTooLarge(HTTPException):
    """A request body over the limit (an HTTPException: FastAPI's body parsing lets it through
    to the handlers, which answer 413)."""

    def __init__(self, limit: int) -> None:
        super().__init__(status.HTTP_413_CONTENT_TOO_LARGE,
                         f"the request body is larger than {limit} bytes "
                         "(TUNEFORGE_MAX_BODY_BYTES)")


class BodyLimit:
    """413 for a request body over ``limit`` bytes: at once when its Content-Length says so,
    else as soon as the bytes read pass it (a chunked body); nothing more of it is read."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length", "")
        if declared.isdigit() and int(declared) > self.limit:
            error = BodyTooLarge(self.limit)
            response = JSONResponse({"detail": error.detail}, status_code=error.status_code)
            await response(scope, receive, send)
            return
        read = 0

        async def counted() -> Message:
            nonlocal read
            message = await receive()
            if message["type"] == "http.request":
                read += len(message.get("body", b""))
                if read > self.limit:
                    raise BodyTooLarge(self.limit)
            return message

        await self.app(scope, counted, send)


def _message(error: dict[str, Any]) -> str:
    """Pydantic's message, or a plainer one for a body that is not a JSON object."""
    ctx = error.get("ctx")
    if error["type"] == "json_invalid" and isinstance(ctx, dict):  # say where and why
        return f"the body is not valid JSON: {ctx.get('error')} at character {error['loc'][-1]}"
    if tuple(error["loc"]) == ("body",) and error["type"] == "model_attributes_type":
        if isinstance(error.get("input"), bytes):  # FastAPI did not parse it: not sent as JSON
            return "the body must be JSON, sent with Content-Type: application/json"
        return "the body must be a JSON object"
    return str(error["msg"])


async def _validation_error(_request: Request, exc: Exception) -> JSONResponse:
    """422 naming each bad field; the input is not echoed (it may be large, or NaN, which JSON
    cannot carry)."""
    assert isinstance(exc, RequestValidationError)
    detail = [{"loc": list(e["loc"]), "msg": _message(e), "type": e["type"]}
              for e in exc.errors()]
    return JSONResponse({"detail": detail}, status_code=status.HTTP_422_UNPROCESSABLE_CONTENT)


async def _http_error(request: Request, exc: Exception) -> Response:
    """Starlette's answer; a body that cannot be decoded (400) is said why, not just "There was
    an error parsing the body"."""
    assert isinstance(exc, HTTPException)
    if exc.status_code == status.HTTP_400_BAD_REQUEST and exc.__cause__ is not None:
        cause = exc.__cause__
        exc = HTTPException(exc.status_code, f"the body cannot be read as JSON: "
                            f"{type(cause).__name__}: {str(cause)[:200]}")
    return await http_exception_handler(request, exc)


app = create_app()
