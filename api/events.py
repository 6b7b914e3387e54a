"""Server-sent events of a campaign: caught up from the database, then pushed through Redis.

Each API process holds one Redis connection for all its streams: a pattern subscription to
every campaign's channel (``core.feed``), whose messages it hands to the streams of that
campaign (:class:`_Hub`). A stream registers with it first — once Redis has confirmed the
subscription — then reads the database for every event after its start point, then sends what
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
- a campaign whose last publish was lost is read again every ``TUNEFORGE_SSE_CHECK_S`` (10 s),
  the events of that read sent after those pushed in the same turn; without
  Redis (none at the stream's start, or the process's subscription broke) the stream reads the
  database every ``POLL_S``.

The start point (``?after=``, ``Last-Event-ID``) is an event id on both paths: a pushed event
at or before it is counted and not sent, as the read does not send it. A read goes through the
log ``BATCH`` events at a time, each batch moving the cursor on, so a finished campaign of any
length replays whole. The stream ends with the ``finished`` event (or once it is past it), and
within ``KEY_CHECK_S`` and a turn after the key it was opened with is revoked or rotated away.
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

from api.security import key_refused
from core.db import session_factory
from core.feed import channel
from core.models import Campaign, Event
from core.settings import get_settings

log = logging.getLogger(__name__)

POLL_S = 0.2  # without Redis: how often the database is read
KEEPALIVE_S = 15.0
SUBSCRIBE_TIMEOUT_S = 5.0
#: an open stream ends this long at most after its key is revoked (or rotated away)
KEY_CHECK_S = 1.5
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
    skipped (``last_seq`` is known once the database was read to its end). A stream sends the
    events whose id is past its start point (``?after=``, ``Last-Event-ID``), read or pushed
    alike."""

    last_id: int
    last_seq: int | None = None
    #: the campaign's ``finished`` event was sent, or counted (a start point past it)
    ended: bool = False

    def from_database(self, rows: Sequence[StreamEvent], event_seq: int | None
                      ) -> list[StreamEvent]:
        """What to send of one batch of a read of the database: ``rows``, the campaign's
        events after :attr:`last_id` in id order (every event committed by then: numbers and
        ids grow in commit order). ``event_seq``, the campaign's number read before the
        batch, is given with the read's last batch only (the one shorter than ``BATCH``):
        every event up to it was committed before that batch, so it is where the stream
        stands once its read is done. An earlier batch says nothing of the events after it."""
        out = [r for r in rows
               if r.id > self.last_id and (self.last_seq is None or r.seq > self.last_seq)]
        if rows:
            self.last_id = max(self.last_id, rows[-1].id)
        tops = [r.seq for r in out] + ([event_seq] if event_seq is not None else [])
        if tops:
            top = max(tops)
            self.last_seq = top if self.last_seq is None else max(self.last_seq, top)
        return out

    def from_push(self, events: Sequence[StreamEvent]) -> list[StreamEvent] | None:
        """What to send of a pushed message, or None when an event before it is missing (the
        stream then reads the database, which has it). An event at or before the stream's
        start point (its id not past :attr:`last_id`) is counted and not sent, as the read of
        the database does not send it."""
        assert self.last_seq is not None, "read the database first"
        last_id, last_seq = self.last_id, self.last_seq
        out = []
        for ev in sorted(events, key=lambda e: e.seq):
            if ev.seq <= last_seq:
                continue  # sent already (it was committed before the stream read the database)
            if ev.seq != last_seq + 1:
                return None
            last_seq = ev.seq
            if ev.id > last_id:
                out.append(ev)
                last_id = ev.id
            if ev.kind == "finished":
                self.ended = True
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


# ---- Redis: one subscription per process ------------------------------------------------------
_client: Any = None
#: what a stream's queue receives when the process's subscription broke
LOST = object()
_PATTERN = channel("*")
#: the name the process's Redis connection of the event streams shows in ``CLIENT LIST``
CLIENT_NAME = "tuneforge-events"
_PREFIX = channel("")


def _redis() -> Any:
    global _client
    if _client is None:
        import redis.asyncio

        _client = redis.asyncio.Redis.from_url(get_settings().redis_url,
                                               client_name=CLIENT_NAME)
    return _client


class _Hub:
    """This process's one pattern subscription to every campaign's channel, fanned out to the
    queues of the streams that watch each campaign. Started by the first stream that needs it
    (again after it broke); a stream registered once Redis confirmed the subscription receives
    every message published from then on. When the connection breaks every registered stream
    gets :data:`LOST` and reads the database from then on."""

    def __init__(self) -> None:
        self.queues: dict[str, set[asyncio.Queue[Any]]] = {}
        self.task: asyncio.Task[None] | None = None
        self.ready: asyncio.Future[bool] | None = None

    async def attach(self, campaign_id: str) -> asyncio.Queue[Any] | None:
        """A queue of the campaign's pushed messages, or None when Redis cannot be reached."""
        if self.task is None or self.task.done():
            self.ready = asyncio.get_running_loop().create_future()
            self.task = asyncio.create_task(self._run(self.ready))
        assert self.ready is not None
        try:
            ok = await asyncio.wait_for(asyncio.shield(self.ready), SUBSCRIBE_TIMEOUT_S)
        except TimeoutError:
            ok = False
        if not ok:
            log.warning("event stream of %s: no Redis subscription, reading the database every "
                        "%g s", campaign_id, POLL_S)
            return None
        queue: asyncio.Queue[Any] = asyncio.Queue()
        self.queues.setdefault(campaign_id, set()).add(queue)
        return queue

    def detach(self, campaign_id: str, queue: asyncio.Queue[Any]) -> None:
        """The stream is gone (no-op when the hub dropped it already)."""
        watchers = self.queues.get(campaign_id)
        if watchers is not None:
            watchers.discard(queue)
            if not watchers:
                del self.queues[campaign_id]

    async def _run(self, ready: asyncio.Future[bool]) -> None:
        pubsub = None
        try:
            pubsub = _redis().pubsub()
            await pubsub.psubscribe(_PATTERN)
            deadline = time.monotonic() + SUBSCRIBE_TIMEOUT_S
            while not ready.done():
                if time.monotonic() > deadline:
                    raise TimeoutError("Redis did not confirm the subscription")
                message = await pubsub.get_message(timeout=0.5)
                if message is not None and message["type"] == "psubscribe":
                    ready.set_result(True)
            while True:
                message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
                if message is None or message.get("type") != "pmessage":
                    continue
                name = message["channel"]
                name = name.decode() if isinstance(name, bytes) else str(name)
                for queue in list(self.queues.get(name.removeprefix(_PREFIX), ())):
                    queue.put_nowait(message["data"])
        except asyncio.CancelledError:
            raise
        except Exception:
            log.warning("the event streams' Redis subscription broke: they read the database "
                        "every %g s", POLL_S, exc_info=True)
        finally:
            if not ready.done():
                ready.set_result(False)
            dropped, self.queues = self.queues, {}
            for watchers in dropped.values():
                for queue in watchers:
                    queue.put_nowait(LOST)
            if pubsub is not None:
                await _close(pubsub)

    async def stop(self) -> None:
        """Cancel the subscription (at the API's shutdown)."""
        task, self.task = self.task, None
        if task is not None and not task.done():
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass


_HUB = _Hub()


async def close_subscriptions() -> None:
    """Close this process's Redis subscription and client of the event streams (at the API's
    shutdown)."""
    global _client
    await _HUB.stop()
    if _client is not None:
        client, _client = _client, None
        await client.aclose()


async def _close(pubsub: Any) -> None:
    try:
        await pubsub.aclose()
    except Exception:
        log.debug("closing a subscription failed", exc_info=True)


# ---- the stream -------------------------------------------------------------------------------
async def event_stream(campaign_id: str, after: int, request: Request,
                       key_hash: str | None = None) -> AsyncIterator[str]:
    """Every event after ``after``, as it is committed, until the ``finished`` event; the
    stream ends within :data:`KEY_CHECK_S` once the key it was opened with (``key_hash``) is
    revoked."""
    yield "retry: 2000\n\n"
    cursor = Cursor(after)
    queue = await _HUB.attach(campaign_id)  # before the first read: see the module's text
    SENT["streams"] += 1
    try:
        async for frame in _stream(campaign_id, cursor, queue, request, key_hash):
            yield frame
    finally:
        SENT["streams_closed"] += 1
        if queue is not None:
            _HUB.detach(campaign_id, queue)


async def _stream(campaign_id: str, cursor: Cursor, queue: asyncio.Queue[Any] | None,
                  request: Request, key_hash: str | None) -> AsyncIterator[str]:
    status: str | None = None

    async def read_batch() -> tuple[list[StreamEvent], bool]:
        """The next batch after the cursor from the database, and whether it was the last."""
        nonlocal status
        rows, status, event_seq = await run_in_threadpool(_fetch, campaign_id, cursor.last_id)
        complete = len(rows) < BATCH
        out = cursor.from_database(rows, event_seq if complete else None)
        SENT["database"] += len(out)
        return out, complete

    complete = False
    while not complete:
        events, complete = await read_batch()
        for ev in events:
            yield _frame(ev)
            if ev.kind == "finished":
                return
    if status is None or status in FINISHED:
        return  # finished before the stream's start point: nothing more will come
    check_s = get_settings().sse_check_s
    last_read = last_sent = last_key_check = time.monotonic()
    while True:
        events = []
        gap = False
        if queue is not None:
            try:
                data = await asyncio.wait_for(queue.get(), 1.0)
            except TimeoutError:
                data = None
            if data is LOST:
                log.warning("event stream of %s lost Redis: reading the database every %g s",
                            campaign_id, POLL_S)
                queue, data, gap = None, None, True
            if data is not None:
                pushed = cursor.from_push(_decode(data))
                if pushed is None:
                    gap = True  # an event before these is missing: the database has it
                else:
                    events = pushed
                    SENT["push"] += len(pushed)
        read = gap or time.monotonic() - last_read >= (POLL_S if queue is None else check_s)
        if read:
            complete = False
            while not complete:  # after what was pushed this turn, never instead of it
                batch, complete = await read_batch()
                events += batch
            last_read = time.monotonic()
        for ev in events:
            yield _frame(ev)
            last_sent = time.monotonic()
            if ev.kind == "finished":
                return
        if status is None or cursor.ended or (read and status in FINISHED):
            return  # the campaign is gone, or finished before the stream's start point
        now = time.monotonic()
        if key_hash is not None and now - last_key_check >= KEY_CHECK_S:
            last_key_check = now
            refused = await KEYS.refused(key_hash)
            if refused is not None:
                yield _revoked(refused)
                return
        if not events:
            if await request.is_disconnected():
                return
            if time.monotonic() - last_sent > KEEPALIVE_S:
                yield ": keep-alive\n\n"
                last_sent = time.monotonic()
            if queue is None:
                await asyncio.sleep(POLL_S)


def _revoked(why: str) -> str:
    """The last frame of a stream whose key was revoked (no ``id``: it is no event of the
    campaign); the client's next request gets the 401."""
    return f"event: revoked\ndata: {json.dumps({'detail': why})}\n\n"


class _KeyChecks:
    """Whether the keys of open streams still hold, read at most once per
    :data:`KEY_CHECK_S` per key for all the process's streams (one small query)."""

    def __init__(self) -> None:
        self._checked: dict[str, tuple[float, str | None]] = {}

    async def refused(self, key_hash: str) -> str | None:
        """Why the key is refused now (revoked, or gone), or None while it holds."""
        now = time.monotonic()
        found = self._checked.get(key_hash)
        if found is not None and now - found[0] < KEY_CHECK_S:
            return found[1]
        why = await run_in_threadpool(_key_refused, key_hash)
        if len(self._checked) > 4096:
            self._checked = {k: v for k, v in self._checked.items() if now - v[0] < KEY_CHECK_S}
        self._checked[key_hash] = (time.monotonic(), why)
        return why


KEYS = _KeyChecks()


def _key_refused(key_hash: str) -> str | None:
    with session_factory(get_settings().effective_database_url)() as s:
        return key_refused(s, key_hash=key_hash)
