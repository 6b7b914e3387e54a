"""Server-sent events from the Event table: poll by id, resume after Last-Event-ID, end with
the campaign."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import Request
from sqlalchemy import select
from starlette.concurrency import run_in_threadpool

from core.db import session_factory
from core.models import Campaign, Event
from core.settings import get_settings

POLL_S = 0.2
KEEPALIVE_S = 15.0
BATCH = 500
FINISHED = ("done", "failed", "cancelled")


def _fetch(campaign_id: str, after: int) -> tuple[list[tuple[int, str, Any, str]], str | None]:
    with session_factory(get_settings().effective_database_url)() as s:
        rows = s.execute(
            select(Event.id, Event.kind, Event.payload, Event.created_at)
            .where(Event.campaign_id == campaign_id, Event.id > after)
            .order_by(Event.id).limit(BATCH)
        ).all()
        status = s.scalar(select(Campaign.status).where(Campaign.id == campaign_id))
    return [(r[0], r[1], r[2], r[3].isoformat()) for r in rows], status


def format_event(event_id: int, kind: str, payload: Any, created_at: str) -> str:
    """One SSE frame: ``id``, ``event`` and a JSON ``data`` line."""
    data = json.dumps({"kind": kind, "created_at": created_at, **(payload or {})},
                      separators=(",", ":"), default=str)
    return f"id: {event_id}\nevent: {kind}\ndata: {data}\n\n"


async def event_stream(campaign_id: str, after: int, request: Request) -> AsyncIterator[str]:
    """Every event after ``after``, as it is written, until the ``finished`` event."""
    yield "retry: 2000\n\n"
    last_sent = time.monotonic()
    while True:
        rows, status = await run_in_threadpool(_fetch, campaign_id, after)
        for event_id, kind, payload, created_at in rows:
            yield format_event(event_id, kind, payload, created_at)
            after = event_id
            last_sent = time.monotonic()
            if kind == "finished":
                return
        if not rows and status in FINISHED:
            return  # finished before the stream's start point: nothing more will come
        if len(rows) == BATCH:
            continue
        if await request.is_disconnected():
            return
        if time.monotonic() - last_sent > KEEPALIVE_S:
            yield ": keep-alive\n\n"
            last_sent = time.monotonic()
        await asyncio.sleep(POLL_S)
