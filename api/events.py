"""Server-sent events of a campaign: caught up from the database, then pushed through Redis.

A stream subscribes to the campaign's Redis channel (``core.feed``) first and waits until
Redis confirms, then reads the database for every event after its start point, then sends what
the processes that write events publish once their transactions commit. Every event carries
its number within the campaign (``seq``: 1, 2, 3, … in commit order, under the campaign's row
lock), which settles the switch-over and the faults of a push channel:

- an event both read and pushed (committed between the subscription and the read) has a number
  the stream sent already: it is skipped, never sent twice;
- an event committed after the read was published after its commit, so after the subscription:
  it arrives;
- a number further on than the next one (two transactions' messages arrived in the other
  order, or a publish was lost) makes the stream read the database from its last event: a
  missed event is sent late, in order, never lost;
- a campaign whose last publish was lost is read again every ``CHECK_S`` of silence; without
  Redis the stream reads the database every ``POLL_S``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from fastapi import Request
from sqlalchemy import bindparam, select
from starlette.concurrency import run_in_threadpool

from core.db import session_factory
from core.feed import channel
from core.models import Campaign, Event
from core.settings import get_settings

log = logging.getLogger(__name__)

POLL_S = 0.2  # without Redis: how often the database is read
CHECK_S = 10.0  # with Redis: the database is read after this long without a message
KEEPALIVE_S = 15.0
SUBSCRIBE_TIMEOUT_S = 5.0
BATCH = 500
FINISHED = ("done", "failed", "cancelled")

#: Events sent by this process's streams, by where they came from (``/metrics``).
SENT: Counter[str] = Counter()


class StreamEvent(NamedTuple):
    """One event as a stream sends it."""

    id: int
    seq: int
    kind: str
    payload: Any
    created_at: str


@dataclass
class Cursor:
    """Where one stream stands: the id and the number (``seq``) of the last event it sent or
    skipped (``last_seq`` is known once the database was read)."""

    last_id: int
    last_seq: int | None = None

    def from_database(self, rows: Sequence[StreamEvent], event_seq: int) -> list[StreamEvent]:
        """What to send of a read of the database: ``event_seq`` is the campaign's number read
        first, then ``rows``, its events after :attr:`last_id` in id order (every event
        committed by then: numbers and ids grow in commit order)."""
        out = [r for r in rows
               if r.id > self.last_id and (self.last_seq is None or r.seq > self.last_seq)]
        if out:
            self.last_id = out[-1].id
        top = max([event_seq, *(r.seq for r in out)])
        self.last_seq = top if self.last_seq is None else max(self.last_seq, top)
        return out

    def from_push(self, events: Sequence[StreamEvent]) -> list[StreamEvent] | None:
        """What to send of a pushed message, or None when an event before it is missing (the
        stream then reads the database, which has it)."""
        assert self.last_seq is not None, "read the database first"
        last_id, last_seq = self.last_id, self.last_seq
        out = []
        for ev in sorted(events, key=lambda e: e.seq):
            if ev.seq <= last_seq:
                continue  # sent already (it was committed before the stream read the database)
            if ev.seq != last_seq + 1:
                return None
            out.append(ev)
            last_id, last_seq = ev.id, ev.seq
        self.last_id, self.last_seq = last_id, last_seq
        return out


_CAMPAIGN = select(Campaign.status, Campaign.event_seq).where(Campaign.id == bindparam("cid"))
_EVENTS = (select(Event.id, Event.seq, Event.kind, Event.payload, Event.created_at)
           .where(Event.campaign_id == bindparam("cid"), Event.id > bindparam("after"))
           .order_by(Event.id).limit(BATCH))


def _fetch(campaign_id: str, after: int) -> tuple[list[StreamEvent], str | None, int]:
    """The campaign's status and number (read first), then up to ``BATCH`` events after
    ``after``."""
    with session_factory(get_settings().effective_database_url)() as s:
        found = s.execute(_CAMPAIGN, {"cid": campaign_id}).first()
        rows = s.execute(_EVENTS, {"cid": campaign_id, "after": after}).all()
    status, event_seq = (found[0], int(found[1] or 0)) if found is not None else (None, 0)
    return ([StreamEvent(r[0], r[1], r[2], r[3], r[4].isoformat()) for r in rows], status,
            event_seq)


def format_event(event_id: int, kind: str, payload: Any, created_at: str) -> str:
    """One SSE frame: ``id``, ``event`` and a JSON ``data`` line."""
    data = json.dumps({"kind": kind, "created_at": created_at, **(payload or {})},
                      separators=(",", ":"), default=str)
    return f"id: {event_id}\nevent: {kind}\ndata: {data}\n\n"


def _frame(ev: StreamEvent) -> str:
    return format_event(ev.id, ev.kind, ev.payload, ev.created_at)


def _decode(data: Any) -> list[StreamEvent]:
    message = json.loads(data)
    return [StreamEvent(int(e["id"]), int(e["seq"]), str(e["kind"]), e.get("payload"),
                        str(e["created_at"])) for e in message.get("events", [])]


# ---- Redis subscriptions ----------------------------------------------------------------------
_client: Any = None


def _redis() -> Any:
    global _client
    if _client is None:
        import redis.asyncio

        _client = redis.asyncio.Redis.from_url(get_settings().redis_url)
    return _client


async def close_subscriptions() -> None:
    """Close this process's Redis client of the event streams (at the API's shutdown)."""
    global _client
    if _client is not None:
        client, _client = _client, None
        await client.aclose()


async def _subscribe(campaign_id: str) -> Any:
    """A pub/sub subscription to the campaign's channel that Redis has confirmed (messages
    published from then on reach it), or None when Redis cannot be reached."""
    pubsub = None
    try:
        pubsub = _redis().pubsub()
        await pubsub.subscribe(channel(campaign_id))
        deadline = time.monotonic() + SUBSCRIBE_TIMEOUT_S
        while time.monotonic() < deadline:
            message = await pubsub.get_message(timeout=0.5)
            if message is not None and message["type"] == "subscribe":
                return pubsub
        raise TimeoutError("Redis did not confirm the subscription")
    except Exception:
        log.warning("event stream of %s: no Redis subscription, reading the database every "
                    "%g s", campaign_id, POLL_S, exc_info=True)
        if pubsub is not None:
            await _close(pubsub)
        return None


async def _close(pubsub: Any) -> None:
    try:
        await pubsub.aclose()
    except Exception:
        log.debug("closing a subscription failed", exc_info=True)


# ---- the stream -------------------------------------------------------------------------------
async def event_stream(campaign_id: str, after: int, request: Request) -> AsyncIterator[str]:
    """Every event after ``after``, as it is committed, until the ``finished`` event."""
    yield "retry: 2000\n\n"
    cursor = Cursor(after)
    pubsub = await _subscribe(campaign_id)  # before the first read: see the module's text
    SENT["streams"] += 1
    try:
        async for frame in _stream(campaign_id, cursor, pubsub, request):
            yield frame
    finally:
        SENT["streams_closed"] += 1
        if pubsub is not None:
            await _close(pubsub)


async def _stream(campaign_id: str, cursor: Cursor, pubsub: Any,
                  request: Request) -> AsyncIterator[str]:
    async def read() -> tuple[list[StreamEvent], str | None]:
        """Everything after the cursor from the database (in batches)."""
        out: list[StreamEvent] = []
        while True:
            rows, status, event_seq = await run_in_threadpool(_fetch, campaign_id,
                                                              cursor.last_id)
            out += cursor.from_database(rows, event_seq)
            if len(rows) < BATCH:
                SENT["database"] += len(out)
                return out, status

    events, status = await read()
    for ev in events:
        yield _frame(ev)
        if ev.kind == "finished":
            return
    if status is None or status in FINISHED:
        return  # finished before the stream's start point: nothing more will come
    last_read = last_sent = time.monotonic()
    while True:
        events = []
        gap = False
        if pubsub is not None:
            try:
                message = await pubsub.get_message(ignore_subscribe_messages=True,
                                                   timeout=1.0)
            except Exception:
                log.warning("event stream of %s lost Redis: reading the database every %g s",
                            campaign_id, POLL_S, exc_info=True)
                await _close(pubsub)
                pubsub, message, gap = None, None, True
            if message is not None and message.get("type") == "message":
                pushed = cursor.from_push(_decode(message["data"]))
                if pushed is None:
                    gap = True  # an event before these is missing: the database has it
                else:
                    events = pushed
                    SENT["push"] += len(pushed)
        now = time.monotonic()
        if gap or now - last_read >= (POLL_S if pubsub is None else CHECK_S):
            events, status = await read()
            last_read = time.monotonic()
        for ev in events:
            yield _frame(ev)
            last_sent = time.monotonic()
            if ev.kind == "finished":
                return
        if status is None:
            return  # the campaign is gone
        if not events:
            if await request.is_disconnected():
                return
            if time.monotonic() - last_sent > KEEPALIVE_S:
                yield ": keep-alive\n\n"
                last_sent = time.monotonic()
            if pubsub is None:
                await asyncio.sleep(POLL_S)
