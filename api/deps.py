"""FastAPI dependencies, declared once as ``Annotated`` aliases."""

from __future__ import annotations

import asyncio
import re
import secrets
from collections.abc import AsyncIterator
from typing import Annotated
from weakref import WeakKeyDictionary

from fastapi import Depends, HTTPException, Path, Query, Request, Security, status
from fastapi.security import APIKeyHeader
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from agent.campaigns import shown
from api.schemas import MAX_OFFSET
from api.security import Authenticated, authenticate
from core.db import session_factory
from core.models import Campaign
from core.settings import Settings, get_settings

#: Requests that hold a database session at once (the others wait for a turn, holding
#: nothing). A request takes a worker thread for each of its steps (key check, endpoint,
#: teardown) and holds its connection from the first query to the teardown: with fewer
#: sessions than threads (``api.main.API_THREADS``) and than pooled connections
#: (``core.db``: 10 + 20), one that holds a connection always gets a thread and one in a
#: thread always gets a connection. Without it, 100 clients at once took every connection
#: with requests waiting for a thread, and every thread with requests waiting for a
#: connection: the API stood still until the pool's 30 s timeout.
MAX_SESSIONS = 16

_turns: WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = WeakKeyDictionary()


def _turn() -> asyncio.Semaphore:
    loop = asyncio.get_running_loop()  # one per event loop (a test client runs its own)
    turns = _turns.get(loop)
    if turns is None:
        turns = _turns[loop] = asyncio.Semaphore(MAX_SESSIONS)
    return turns


async def get_db() -> AsyncIterator[Session]:
    """One session per request (the endpoint commits what it writes), once it is this
    request's turn (:data:`MAX_SESSIONS`). Opening one does no I/O (it connects at its first
    query, in the endpoint's thread); closing it returns the connection to the pool, in a
    worker thread."""
    async with _turn():
        session = session_factory(get_settings().effective_database_url)()
        try:
            yield session
        finally:
            await run_in_threadpool(session.close)


SessionDep = Annotated[Session, Depends(get_db)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
OffsetQuery = Annotated[int, Query(ge=0, le=MAX_OFFSET, description="rows to skip")]


#: The team's key, in the ``X-API-Key`` header (an OpenAPI security scheme: the docs page and
#: API clients know where it goes); checked by :func:`get_team`, which says what is wrong.
API_KEY = APIKeyHeader(name="X-API-Key", auto_error=False,
                       description="the team's API key (`tuneforge admin create-team`)")


def get_team(session: SessionDep,
             x_api_key: Annotated[str | None, Security(API_KEY)] = None) -> Authenticated:
    """The team of the request's ``X-API-Key`` (401 when missing, unknown or revoked)."""
    if not x_api_key:
        raise HTTPException(status.HTTP_401_UNAUTHORIZED,
                            "missing X-API-Key header: set TUNEFORGE_API_KEY or pass --key",
                            headers={"WWW-Authenticate": "ApiKey"})
    who = authenticate(session, key=x_api_key)
    if isinstance(who, str):
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, who,
                            headers={"WWW-Authenticate": "ApiKey"})
    return who


TeamDep = Annotated[Authenticated, Depends(get_team)]


#: What :func:`core.models.new_id` makes (uuid4 hex): any other id names nothing, and is a 404
#: without a query (a NUL byte, which PostgreSQL text cannot hold, would fail it).
ID_RE = re.compile(r"[0-9a-f]{32}")


def is_id(text: str) -> bool:
    """Whether ``text`` is the form of a row id."""
    return ID_RE.fullmatch(text) is not None


def get_campaign(campaign_id: Annotated[str, Path()], session: SessionDep,
                 team: TeamDep) -> Campaign:
    """The campaign, if the caller's team owns it (another team's campaign is a 404)."""
    campaign = session.get(Campaign, campaign_id) if is_id(campaign_id) else None
    if campaign is None or campaign.team_id != team.team_id:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no campaign {shown(campaign_id)}")
    return campaign


CampaignDep = Annotated[Campaign, Depends(get_campaign)]

#: The operator's token (``TUNEFORGE_OPERATOR_TOKEN``), for the views of the whole fleet that
#: show every team's activity (``/workers``, ``/metrics``); Prometheus sends it as a bearer token.
OPERATOR_TOKEN = APIKeyHeader(name="X-Operator-Token", auto_error=False,
                              description="the operator's token (TUNEFORGE_OPERATOR_TOKEN): "
                                          "the fleet-wide views")


def _bearer(authorization: str | None) -> str | None:
    scheme, _, token = (authorization or "").partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def get_operator(request: Request, session: SessionDep, settings: SettingsDep,
                 token: Annotated[str | None, Security(OPERATOR_TOKEN)] = None) -> None:
    """Let the operator through: its token in ``X-Operator-Token`` (or ``Authorization:
    Bearer``). 401 without a credential or with a wrong one; 403 for a team's key (a team sees
    its own campaigns, not the fleet's), and while no operator token is configured."""
    given = token or _bearer(request.headers.get("authorization"))
    wanted = settings.operator_token
    if given is not None:
        if wanted and secrets.compare_digest(given.encode(), wanted.encode()):
            return
        if not wanted:
            raise HTTPException(status.HTTP_403_FORBIDDEN, (
                "no operator token is configured: set TUNEFORGE_OPERATOR_TOKEN on the API to "
                "open the fleet-wide views"))
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "invalid operator token",
                            headers={"WWW-Authenticate": "Bearer"})
    key = request.headers.get("x-api-key")
    if key:
        who = authenticate(session, key=key)
        if isinstance(who, str):
            raise HTTPException(status.HTTP_401_UNAUTHORIZED, who,
                                headers={"WWW-Authenticate": "ApiKey"})
    raise HTTPException(
        status.HTTP_403_FORBIDDEN if key else status.HTTP_401_UNAUTHORIZED,
        f"{request.url.path.removeprefix('/api/v1')} shows the whole fleet (every team's "
        "work): it needs the operator's token in X-Operator-Token or Authorization: Bearer "
        "(TUNEFORGE_OPERATOR_TOKEN)", headers={"WWW-Authenticate": "Bearer"})


OperatorDep = Annotated[None, Depends(get_operator)]
#: any length: an id that is not 32 hex digits names nothing, a 404 (not a 422) like any other
CampaignIdPath = Annotated[str, Path()]
ApiKeyDep = Annotated[str | None, Security(API_KEY)]


async def owned_campaign_id(campaign_id: str, key: str | None) -> str:
    """:func:`get_team` and :func:`get_campaign` for a response that outlives its handler (the
    event stream): the session and its turn are given back before the response starts. As
    dependencies they would be held until the response ends, so that 16 open streams would
    hold every turn and stop the whole API."""
    async with _turn():
        session = session_factory(get_settings().effective_database_url)()
        try:
            return await run_in_threadpool(_owned_campaign_id, session, campaign_id, key)
        finally:
            await run_in_threadpool(session.close)


def _owned_campaign_id(session: Session, campaign_id: str, key: str | None) -> str:
    return get_campaign(campaign_id, session, get_team(session, key)).id
