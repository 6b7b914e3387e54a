"""FastAPI dependencies, declared once as ``Annotated`` aliases."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Header, HTTPException, Path, status
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from api.security import Authenticated, authenticate
from core.db import session_factory
from core.models import Campaign
from core.settings import Settings, get_settings


async def get_db() -> AsyncIterator[Session]:
    """One session per request (the endpoint commits what it writes). Opening one does no I/O
    (it connects at its first query, in the endpoint's thread); closing it returns the
    connection to the pool, in a worker thread."""
    session = session_factory(get_settings().effective_database_url)()
    try:
        yield session
    finally:
        await run_in_threadpool(session.close)


SessionDep = Annotated[Session, Depends(get_db)]
SettingsDep = Annotated[Settings, Depends(get_settings)]


def get_team(session: SessionDep,
             x_api_key: Annotated[str | None, Header(alias="X-API-Key")] = None
             ) -> Authenticated:
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


def get_campaign(campaign_id: Annotated[str, Path(max_length=64)], session: SessionDep,
                 team: TeamDep) -> Campaign:
    """The campaign, if the caller's team owns it (another team's campaign is a 404)."""
    campaign = session.get(Campaign, campaign_id)
    if campaign is None or campaign.team_id != team.team_id:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no campaign {campaign_id}")
    return campaign


CampaignDep = Annotated[Campaign, Depends(get_campaign)]
