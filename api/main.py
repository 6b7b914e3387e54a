"""The FastAPI app: everything under ``/api/v1``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio.to_thread
from fastapi import APIRouter, FastAPI, Request, status
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from api import ui
from api.routes import campaigns, dashboard, system

API_PREFIX = "/api/v1"

#: Threads serving the synchronous endpoints: fewer than the database pool holds connections
#: (core/db.py: 10 + 20 overflow). With more threads than connections, a burst of requests can
#: take every thread while waiting for a connection that only a request's teardown (which needs
#: a thread) would give back: the API stalls until the pool's timeout.
API_THREADS = 24


@asynccontextmanager
async def _lifespan(_app: FastAPI) -> AsyncIterator[None]:
    anyio.to_thread.current_default_thread_limiter().total_tokens = API_THREADS
    yield


def create_app() -> FastAPI:
    """The REST API (campaigns, history, workers, health, metrics)."""
    app = FastAPI(title="tuneforge", version="0.1.0",
                  summary="Auto-tunes CUDA kernels with an agent in a closed loop.",
                  docs_url=f"{API_PREFIX}/docs", openapi_url=f"{API_PREFIX}/openapi.json",
                  lifespan=_lifespan)
    v1 = APIRouter(prefix=API_PREFIX)
    v1.include_router(campaigns.router)
    v1.include_router(system.router)
    v1.include_router(dashboard.router)
    app.include_router(v1)
    ui.install(app)  # the web dashboard under /ui
    app.add_exception_handler(RequestValidationError, _validation_error)
    return app


async def _validation_error(_request: Request, exc: Exception) -> JSONResponse:
    """422 naming each bad field; the input is not echoed (it may be large, or NaN, which JSON
    cannot carry)."""
    assert isinstance(exc, RequestValidationError)
    detail = [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]}
              for e in exc.errors()]
    return JSONResponse({"detail": detail}, status_code=status.HTTP_422_UNPROCESSABLE_CONTENT)


app = create_app()
