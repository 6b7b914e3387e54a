"""The web dashboard: static pages under ``/ui`` that read the REST API with the team's key.

The pages hold no data and need no key to load; every figure comes from ``/api/v1`` with the
``X-API-Key`` the browser keeps in ``localStorage``. The event stream is read with ``fetch()``
streaming, which can send that header (``EventSource`` cannot), so the key never goes into a URL,
where access logs, browser history and proxies would keep it. Third-party scripts (uPlot, jsdiff,
diff2html) are vendored under ``api/static/vendor/`` with their licences: nothing is built or
fetched at run time.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.responses import FileResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

STATIC_DIR = Path(__file__).resolve().parent / "static"
UI_PREFIX = "/ui"

#: Only our own scripts, styles and API: a script injected through data could not run, nor send
#: the key elsewhere. diff2html's markup carries inline ``style`` attributes.
CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
       "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; "
       "form-action 'self'")
HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff",
           "Referrer-Policy": "no-referrer", "Cache-Control": "no-cache"}

router = APIRouter(include_in_schema=False)


def _page(name: str) -> FileResponse:
    return FileResponse(STATIC_DIR / name, media_type="text/html", headers=HEADERS)


@router.get("/")
def root() -> RedirectResponse:
    """The dashboard is the service's home page."""
    return RedirectResponse(f"{UI_PREFIX}/")


@router.get(UI_PREFIX)
@router.get(f"{UI_PREFIX}/")
def campaigns_page() -> FileResponse:
    """The team's campaigns."""
    return _page("index.html")


@router.get(UI_PREFIX + "/campaigns/{campaign_id}")
def campaign_page(campaign_id: str) -> FileResponse:
    """One campaign: convergence, candidates, decision chain, profile, source diff."""
    del campaign_id  # read by the page's script from its URL
    return _page("campaign.html")


@router.get(UI_PREFIX + "/sets/{set_id}")
def set_page(set_id: str) -> FileResponse:
    """One shape set: a row a shape, with its campaign's progress and best."""
    del set_id  # read by the page's script from its URL
    return _page("set.html")


@router.get(UI_PREFIX + "/history")
def history_page() -> FileResponse:
    """The team's best results per kernel, shape and GPU."""
    return _page("history.html")


@router.get(UI_PREFIX + "/library")
def library_page() -> FileResponse:
    """The team's library of a family: its entries, near-ties, and the pick at any shape."""
    return _page("library.html")


def install(app: FastAPI) -> None:
    """Add the dashboard's pages and static files to ``app``."""
    app.include_router(router)
    app.mount(f"{UI_PREFIX}/static", StaticFiles(directory=STATIC_DIR), name="ui-static")
