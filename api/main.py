"""The FastAPI app: everything under ``/api/v1``."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI

from api import ui
from api.routes import campaigns, dashboard, system

API_PREFIX = "/api/v1"


def create_app() -> FastAPI:
    """The REST API (campaigns, history, workers, health, metrics)."""
    app = FastAPI(title="tuneforge", version="0.1.0",
                  summary="Auto-tunes CUDA kernels with an agent in a closed loop.",
                  docs_url=f"{API_PREFIX}/docs", openapi_url=f"{API_PREFIX}/openapi.json")
    v1 = APIRouter(prefix=API_PREFIX)
    v1.include_router(campaigns.router)
    v1.include_router(system.router)
    v1.include_router(dashboard.router)
    app.include_router(v1)
    ui.install(app)  # the web dashboard under /ui
    return app


app = create_app()
