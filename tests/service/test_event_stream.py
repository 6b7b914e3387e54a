"""The event stream (``GET /campaigns/{id}/events``): events pushed through Redis once their
transaction commits, caught up from Postgres first, with no gap and no duplicate across the
switch-over, also when messages arrive late, out of order or never; the database alone when
Redis is away. Real Postgres, Redis and API processes; the events are written by this process
through the engine, as the agent writes them."""

from __future__ import annotations

import json
import random
import secrets
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import redis
from sqlalchemy import select, text

from agent.engine import lifecycle, locking
from core import feed
from core.db import session_scope, upgrade_database
from core.models import Campaign, Event
from core.queues import publish_events
from service.service_stack import (
    OPERATOR_TOKEN,
    START_TIMEOUT_S,
    Stack,
    TeamKey,
    create_database,
    create_team_in_db,
    drop_database,
    free_port,
    service_env,
    wait_until,
)

# ---- the cursor: what a stream sends of a read and of a pushed message -------------------------


def ev(event_id: int, seq: int, kind: str = "note") -> Any:
    from api.events import StreamEvent

    return StreamEvent(event_id, seq, kind, {}, "2026-11-30T00:00:00+00:00")


def test_an_event_both_read_and_pushed_is_sent_once() -> None:
    from api.events import Cursor

    cursor = Cursor(last_id=0)
    # committed between the subscription and the read: in the read and pushed as well
    assert [e.seq for e in cursor.from_database([ev(10, 1), ev(12, 2), ev(15, 3)], 2)] \
        == [1, 2, 3]
    assert cursor.from_push([ev(15, 3)]) == []
    assert [e.id for e in cursor.from_push([ev(15, 3), ev(19, 4)]) or []] == [19]
    assert (cursor.last_id, cursor.last_seq) == (19, 4)


def test_a_resumed_stream_knows_the_number_of_its_start_point() -> None:
    from api.events import Cursor

    cursor = Cursor(last_id=40)  # resumed after event 40, the campaign's 7th; nothing newer yet
    assert cursor.from_database([], 7) == []
    assert cursor.last_seq == 7
    assert [e.id for e in cursor.from_push([ev(44, 8)]) or []] == [44]


def test_a_message_out_of_order_or_lost_sends_the_stream_to_the_database() -> None:
    from api.events import Cursor

    cursor = Cursor(last_id=0)
    cursor.from_database([ev(1, 1)], 1)
    assert cursor.from_push([ev(3, 3)]) is None  # the 2nd is late or lost: nothing is sent
    assert (cursor.last_id, cursor.last_seq) == (1, 1)  # and nothing is skipped
    assert [e.seq for e in cursor.from_database([ev(2, 2), ev(3, 3)], 3)] == [2, 3]
    assert cursor.from_push([ev(2, 2)]) == []  # the late one, when it comes, is not sent again
    assert cursor.from_push([ev(5, 5), ev(4, 4)]) is not None  # one message, any order


def test_a_read_in_batches_sends_every_batch() -> None:
    """A finished campaign of 1203 events, read 500 at a time: each batch is sent and moves
    the cursor on (the first batch took the campaign's number, so that the later batches were
    dropped: 500 events of 803 sent, and a full second batch was read again for ever)."""
    from api.events import BATCH, Cursor

    events = [ev(100 + 3 * i, i + 1) for i in range(1203)]
    cursor = Cursor(last_id=0)
    sent: list[int] = []
    position = 0
    while True:
        rows = [e for e in events if e.id > cursor.last_id][:BATCH]
        complete = len(rows) < BATCH
        sent += [e.seq for e in cursor.from_database(rows, 1203 if complete else None)]
        position += 1
        assert position < 10, "the read does not move on"
        if complete:
            break
    assert sent == list(range(1, 1204))
    assert (cursor.last_id, cursor.last_seq) == (events[-1].id, 1203)


def test_a_pushed_event_at_or_before_the_start_point_is_not_sent() -> None:
    """``after=`` is an event id on both paths: a stream resumed past every event (an id from
    a later campaign, a client's guess) was sent every pushed event all the same."""
    from api.events import Cursor

    cursor = Cursor(last_id=999_999_999)
    assert cursor.from_database([], 5) == []  # the campaign has 5 events, all before it
    assert cursor.from_push([ev(900, 6), ev(901, 7)]) == []
    assert cursor.last_seq == 7  # counted: the next one is not a gap
    assert not cursor.ended
    assert cursor.from_push([ev(902, 8, "finished")]) == []
    assert cursor.ended  # nothing more will come: the stream ends
    resumed = Cursor(last_id=44)
    resumed.from_database([], 7)
    assert [e.id for e in resumed.from_push([ev(40, 7), ev(45, 8)]) or []] == [45]


# ---- publishing: after the commit, never for a rollback ------------------------------------------


@pytest.fixture
def publishing(redis_url: str) -> Iterator[None]:
    feed.set_publisher(lambda cid, events: publish_events(cid, events, redis_url))
    try:
        yield
    finally:
        feed.set_publisher(None)


def running_campaign(db_url: str) -> str:
    with session_scope(db_url) as s:
        campaign = lifecycle.create_campaign(s, lifecycle.CampaignSpec(budget_iterations=1),
                                             backend="replay")
        campaign.status = "running"
        return campaign.id


def note(db_url: str, campaign_id: str, **payload: Any) -> None:
    """One transaction writing one event, as the agent does: under the campaign's row lock."""
    with session_scope(db_url) as s:
        locking.lock_campaign(s, campaign_id)
        locking.emit(s, campaign_id, "note", payload)


def test_events_are_published_after_their_commit_and_never_when_rolled_back(
        service_db: str, redis_url: str, publishing: None) -> None:
    campaign_id = running_campaign(service_db)
    pubsub = redis.Redis.from_url(redis_url).pubsub()
    pubsub.subscribe(feed.channel(campaign_id))
    assert pubsub.get_message(timeout=5)["type"] == "subscribe"

    def received(within: float) -> list[dict[str, Any]]:
        message = pubsub.get_message(ignore_subscribe_messages=True, timeout=within)
        return [] if message is None else list(json.loads(message["data"])["events"])

    def failing_transaction() -> None:
        with session_scope(service_db) as s:
            locking.lock_campaign(s, campaign_id)
            locking.emit(s, campaign_id, "note", {"n": "rolled back"})
            s.flush()  # written, numbered, then rolled back
            raise RuntimeError("the transaction fails")

    with pytest.raises(RuntimeError):
        failing_transaction()
    with session_scope(service_db) as s:
        locking.lock_campaign(s, campaign_id)
        locking.emit(s, campaign_id, "note", {"n": 1})
        savepoint = s.begin_nested()
        locking.emit(s, campaign_id, "note", {"n": "in a savepoint rolled back"})
        s.flush()
        savepoint.rollback()
        locking.emit(s, campaign_id, "note", {"n": 2})
    published = received(5)
    assert [e["payload"]["n"] for e in published] == [1, 2]
    with session_scope(service_db) as s:  # in the database when the message came
        stored = s.execute(select(Event.id, Event.seq).where(
            Event.campaign_id == campaign_id, Event.kind == "note").order_by(Event.id)).all()
        assert s.get(Campaign, campaign_id).event_seq == 3  # type: ignore[union-attr]
    assert [(e["id"], e["seq"]) for e in published] == [tuple(r) for r in stored]
    assert [e["seq"] for e in published] == [2, 3]  # "created" is the 1st; no number skipped
    assert received(0.5) == []  # nothing of the rolled-back transaction, ever


# ---- streams against a real API ----------------------------------------------------------------


@pytest.fixture(scope="module")
def apis(redis_url: str, tmp_path_factory: pytest.TempPathFactory
         ) -> Iterator[tuple[Stack, Stack, Stack]]:
    """API processes on a database of their own (no workers: this module writes the events):
    one with Redis, one whose Redis URL names a port nobody listens on, and one with Redis that
    also reads the database every 50 ms (``TUNEFORGE_SSE_CHECK_S``; 10 s by default), so that
    a read and a pushed message meet in one turn of its streams all the time."""
    db_url = create_database("tuneforge_sse")
    upgrade_database(db_url)
    stacks = []
    try:
        nowhere = f"redis://127.0.0.1:{free_port()}/0"
        for name, url, extra in (("api", redis_url, {}), ("api-no-redis", nowhere, {}),
                                 ("api-quick-check", redis_url,
                                  {"TUNEFORGE_SSE_CHECK_S": "0.05"})):
            port = free_port()
            api = f"http://127.0.0.1:{port}"
            st = Stack(api=api, db_url=db_url, redis_url=url,
                       env={**service_env(db_url, url, tmp_path_factory.mktemp("sse-home"),
                                          api), **extra},
                       logs=tmp_path_factory.mktemp(f"{name}-logs"))
            stacks.append(st)
            st.start(name, "serve", "--port", str(port))

        def up() -> bool:  # healthy, or saying that Redis is away (503)
            try:
                return all(httpx.get(f"{s.api}/api/v1/healthz", timeout=5).status_code in
                           (200, 503) for s in stacks)
            except httpx.TransportError:
                return False

        wait_until(up, START_TIMEOUT_S, "the APIs", stacks[0], interval=0.3)
        yield stacks[0], stacks[1], stacks[2]
    finally:
        for st in stacks:
            st.stop_all()
        drop_database(db_url)


def read_stream(st: Stack, key: str, campaign_id: str, after: int,
                into: list[int]) -> None:
    """The ids of the events a stream sends, until its ``finished`` event."""
    with st.client(key) as client, client.stream(
            "GET", f"/campaigns/{campaign_id}/events", params={"after": after},
            timeout=httpx.Timeout(60.0)) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if line.startswith("id: "):
                into.append(int(line[4:]))


def sse_counts(st: Stack) -> dict[str, int]:
    text = httpx.get(f"{st.api}/api/v1/metrics", timeout=10,
                     headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"}).text
    return {source: int(float(line.rsplit(" ", 1)[1])) for source in ("push", "database")
            for line in text.splitlines()
            if line.startswith(f'tuneforge_sse_events_sent_total{{source="{source}"}}')}


def test_streams_started_while_events_commit_get_each_event_once_in_order(
        apis: tuple[Stack, Stack, Stack], redis_url: str) -> None:
    """Two writers commit 600 events as fast as they can (their publishes delayed 0-3 ms at
    random, so that messages overtake each other, and one in 25 never sent), while 12 streams
    start at random moments from random points: each must send exactly the events after its
    start point, in order, and the live ones mostly by push."""
    st, _, _ = apis
    team = create_team_in_db(st, f"sse-{secrets.token_hex(3)}")
    campaign_id = _campaign_of(st, team)
    rng = random.Random(5)
    dropped: list[int] = []

    def flaky_publish(cid: str, events: list[dict[str, Any]]) -> None:
        time.sleep(rng.random() * 0.003)
        if rng.random() < 0.04 and all(e["kind"] != "finished" for e in events):
            dropped.extend(e["seq"] for e in events)
            return
        publish_events(cid, events, redis_url)

    before = sse_counts(st)
    feed.set_publisher(flaky_publish)
    streams: list[tuple[int, list[int], threading.Thread]] = []
    try:
        def writer(name: str) -> None:
            for i in range(300):
                note(st.db_url, campaign_id, writer=name, i=i)

        writers = [threading.Thread(target=writer, args=(n,)) for n in "ab"]
        for w in writers:
            w.start()
        for _ in range(12):
            time.sleep(rng.random() * 0.15)
            with session_scope(st.db_url) as s:
                ids = list(s.scalars(select(Event.id).where(Event.campaign_id == campaign_id)))
            after = rng.choice([0, *ids])
            got: list[int] = []
            reader = threading.Thread(target=read_stream,
                                      args=(st, team.key, campaign_id, after, got))
            reader.start()
            streams.append((after, got, reader))
        for w in writers:
            w.join()
        with session_scope(st.db_url) as s:
            campaign = locking.lock_campaign(s, campaign_id)
            lifecycle.finish_campaign(s, campaign, "done", "the test wrote its events")
        for _after, _got, reader in streams:
            reader.join(60)
    finally:
        feed.set_publisher(None)
    with session_scope(st.db_url) as s:
        all_ids = list(s.scalars(select(Event.id).where(Event.campaign_id == campaign_id)
                                 .order_by(Event.id)))
        seqs = list(s.scalars(select(Event.seq).where(Event.campaign_id == campaign_id)
                              .order_by(Event.id)))
    assert seqs == list(range(1, len(all_ids) + 1))  # numbered in commit order, no gap
    assert dropped, "no publish was lost: the test did not test that"
    for after, got, reader in streams:
        assert not reader.is_alive()
        assert got == [i for i in all_ids if i > after], after  # once each, in order
    counts = sse_counts(st)
    pushed = counts["push"] - before.get("push", 0)
    read = counts["database"] - before.get("database", 0)
    sent = sum(len(got) for _after, got, _r in streams)
    assert pushed > 0
    # what the streams did not get by push they read: their catch-up, and the gaps the lost and
    # overtaken messages left
    assert pushed + read == sent


def test_without_redis_the_stream_reads_the_database(apis: tuple[Stack, Stack, Stack]) -> None:
    _, st, _ = apis
    team = create_team_in_db(st, f"sse-{secrets.token_hex(3)}")
    campaign_id = _campaign_of(st, team)
    got: list[int] = []
    reader = threading.Thread(target=read_stream, args=(st, team.key, campaign_id, 0, got))
    reader.start()
    for i in range(20):
        note(st.db_url, campaign_id, i=i)
        time.sleep(0.02)
    with session_scope(st.db_url) as s:
        lifecycle.finish_campaign(s, locking.lock_campaign(s, campaign_id), "done", "written")
    reader.join(30)
    assert not reader.is_alive()
    with session_scope(st.db_url) as s:
        expected = list(s.scalars(select(Event.id).where(Event.campaign_id == campaign_id)
                                  .order_by(Event.id)))
    assert got == expected
    assert sse_counts(st)["push"] == 0


def _campaign_of(st: Stack, team: TeamKey) -> str:
    """A running campaign of ``team`` (no worker drives it: the test writes its events)."""
    from api.security import authenticate

    with session_scope(st.db_url) as s:
        who = authenticate(s, key=team.key)
        assert not isinstance(who, str)
        campaign = lifecycle.create_campaign(
            s, lifecycle.CampaignSpec(budget_iterations=1, team_id=who.team_id), backend="replay")
        campaign.status = "running"
        return campaign.id


def _event_ids(st: Stack, campaign_id: str) -> list[int]:
    with session_scope(st.db_url) as s:
        return list(s.scalars(select(Event.id).where(Event.campaign_id == campaign_id)
                              .order_by(Event.id)))


def _stream_connections(redis_url: str) -> list[dict[str, Any]]:
    """The API processes' Redis connections of the event streams that hold a subscription."""
    from api.events import CLIENT_NAME

    return [c for c in redis.Redis.from_url(redis_url).client_list()
            if c.get("name") == CLIENT_NAME and (int(c.get("psub", 0)) or int(c.get("sub", 0)))]


def _finish(st: Stack, campaign_id: str) -> None:
    with session_scope(st.db_url) as s:
        lifecycle.finish_campaign(s, locking.lock_campaign(s, campaign_id), "done", "written")


def test_streams_of_one_api_process_share_one_redis_subscription(
        apis: tuple[Stack, Stack, Stack], redis_url: str, publishing: None) -> None:
    """Nine streams on three campaigns: no subscription of their own (the API process's one
    pattern subscription serves them; at most one new connection of that kind, where this API
    had none yet), and each stream still gets its own campaign's events, by push."""
    st, _, _ = apis
    team = create_team_in_db(st, f"sse-{secrets.token_hex(3)}")
    campaigns = [_campaign_of(st, team) for _ in range(3)]
    before = sse_counts(st)
    # other API processes of the run (earlier modules) may hold theirs on the same Redis
    connections_before = len(_stream_connections(redis_url))
    got: list[list[int]] = [[] for _ in range(9)]
    readers = [threading.Thread(target=read_stream,
                                args=(st, team.key, campaigns[i % 3], 0, got[i]))
               for i in range(9)]
    for r in readers:
        r.start()
    wait_until(lambda: all(g for g in got), 30, "every stream's first event", st)
    for n in range(5):
        for cid in campaigns:
            note(st.db_url, cid, n=n)
    wait_until(lambda: all(len(g) >= 6 for g in got), 30, "the notes, live", st)
    subscribed = redis.Redis.from_url(redis_url).pubsub_numsub(
        *(feed.channel(cid) for cid in campaigns))
    assert [int(n) for _, n in subscribed] == [0, 0, 0]  # no per-stream channel subscription
    connections = _stream_connections(redis_url)
    assert len(connections) <= connections_before + 1, connections
    assert all(int(c["sub"]) == 0 for c in connections)
    for cid in campaigns:
        _finish(st, cid)
    for r in readers:
        r.join(30)
        assert not r.is_alive()
    for i, ids in enumerate(got):
        assert ids == _event_ids(st, campaigns[i % 3])
    assert sse_counts(st)["push"] - before.get("push", 0) >= 9 * 5


def test_a_broken_subscription_loses_no_event_and_the_next_stream_subscribes_again(
        apis: tuple[Stack, Stack, Stack], redis_url: str, publishing: None) -> None:
    """Redis drops the process's subscription mid-stream: the stream still sends every event,
    in order (from the database where the push missed them), and a stream started afterwards
    is fed by push again."""
    st, _, _ = apis
    team = create_team_in_db(st, f"sse-{secrets.token_hex(3)}")
    campaign_id = _campaign_of(st, team)
    got: list[int] = []
    reader = threading.Thread(target=read_stream, args=(st, team.key, campaign_id, 0, got))
    reader.start()
    wait_until(lambda: bool(got), 30, "the stream's first event", st)
    for i in range(5):
        note(st.db_url, campaign_id, i=i)
    wait_until(lambda: len(got) >= 6, 30, "the first notes", st)
    killed = redis.Redis.from_url(redis_url).client_kill_filter(_type="pubsub")
    assert killed >= 1
    for i in range(5, 10):
        note(st.db_url, campaign_id, i=i)
    _finish(st, campaign_id)
    reader.join(30)
    assert not reader.is_alive()
    assert got == _event_ids(st, campaign_id)

    second = _campaign_of(st, team)
    later: list[int] = []
    pushed_before = sse_counts(st).get("push", 0)
    reader = threading.Thread(target=read_stream, args=(st, team.key, second, 0, later))
    reader.start()
    wait_until(lambda: bool(later), 30, "the new stream's first event", st)
    for i in range(5):
        note(st.db_url, second, i=i)
    _finish(st, second)
    reader.join(30)
    assert not reader.is_alive()
    assert later == _event_ids(st, second)
    assert sse_counts(st)["push"] - pushed_before >= 5


def test_open_streams_hold_no_database_session_turn(apis: tuple[Stack, Stack, Stack],
                                                    publishing: None) -> None:
    """More open streams than the API's database-session turns (``MAX_SESSIONS``): every one
    opens and gets its events, and other requests are answered at once meanwhile. (When the
    stream's session was a dependency, the 17th stream and every request after it waited.)"""
    from api.deps import MAX_SESSIONS

    st, _, _ = apis
    team = create_team_in_db(st, f"sse-{secrets.token_hex(3)}")
    campaign_id = _campaign_of(st, team)
    n = MAX_SESSIONS + 8
    got: list[list[int]] = [[] for _ in range(n)]
    readers = [threading.Thread(target=read_stream, args=(st, team.key, campaign_id, 0, g))
               for g in got]
    for r in readers:
        r.start()
    wait_until(lambda: all(g for g in got), 30, f"{n} open streams' first event", st)
    with st.client(team.key) as client:
        started = time.monotonic()
        assert client.get(f"/campaigns/{campaign_id}").status_code == 200
        assert time.monotonic() - started < 5.0
    note(st.db_url, campaign_id, n=1)
    _finish(st, campaign_id)
    for r in readers:
        r.join(30)
        assert not r.is_alive()
    expected = _event_ids(st, campaign_id)
    assert all(g == expected for g in got)


# ---- replay of long campaigns, reads meeting pushes, start points, revoked keys ----------------


class Reader(threading.Thread):
    """A stream read in a thread: the ids of its events, its event names, how it ended."""

    def __init__(self, st: Stack, key: str, campaign_id: str, *,
                 params: dict[str, Any] | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(daemon=True)
        self.st, self.key, self.campaign_id = st, key, campaign_id
        self.params, self.headers = params, headers or {}
        self.ids: list[int] = []
        self.kinds: list[str] = []
        self.error: BaseException | None = None
        self.status = 0
        self.ended_at: float | None = None
        self.opened = threading.Event()
        self.start()

    def run(self) -> None:
        try:
            with httpx.Client(base_url=f"{self.st.api}/api/v1", timeout=httpx.Timeout(60.0),
                              headers={"X-API-Key": self.key, **self.headers}) as client, \
                    client.stream("GET", f"/campaigns/{self.campaign_id}/events",
                                  params=self.params) as response:
                self.status = response.status_code
                for line in response.iter_lines():
                    if line.startswith("retry:"):
                        self.opened.set()
                    elif line.startswith("id: "):
                        self.ids.append(int(line[4:]))
                    elif line.startswith("event: "):
                        self.kinds.append(line[7:])
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc
        finally:
            self.ended_at = time.monotonic()
            self.opened.set()

    def result(self, timeout: float) -> list[int]:
        """The ids, once the stream ended by itself within ``timeout`` (and cleanly)."""
        self.join(timeout)
        assert not self.is_alive(), f"the stream did not end within {timeout:g} s " \
                                    f"({len(self.ids)} events so far)"
        assert self.error is None, repr(self.error)
        assert self.status == 200
        return self.ids


def bulk_notes(db_url: str, campaign_id: str, n: int) -> None:
    """``n`` events in one transaction (not published: nobody pushes them)."""
    with session_scope(db_url) as s:
        locking.lock_campaign(s, campaign_id)
        for i in range(n):
            locking.emit(s, campaign_id, "note", {"i": i})


def test_a_finished_campaign_of_any_length_replays_whole_from_any_point(
        apis: tuple[Stack, Stack, Stack]) -> None:
    """A finished campaign of 1202 events (the stream reads 500 at a time): a stream from the
    start, from events 501, 1118 and the one before last, with Redis and without, gets every
    event after its start point once, in order, ending with ``finished``, at once. (It sent
    the first 500 events and no ``finished``; with 1000 or more it sent nothing and read the
    same batch for ever.)"""
    st, no_redis, _ = apis
    team = create_team_in_db(st, f"sse-{secrets.token_hex(3)}")
    campaign_id = _campaign_of(st, team)
    bulk_notes(st.db_url, campaign_id, 1200)
    _finish(st, campaign_id)
    ids = _event_ids(st, campaign_id)
    assert len(ids) == 1202
    started = time.monotonic()
    readers = [(after, Reader(api, team.key, campaign_id, params={"after": after}))
               for api in (st, no_redis)
               for after in (0, ids[499], ids[1116], ids[-2])]
    for after, reader in readers:
        assert reader.result(20) == [i for i in ids if i > after], after
        assert reader.kinds[-1] == "finished"
    assert time.monotonic() - started < 20


def test_pushed_events_are_sent_when_a_read_runs_in_the_same_turn(
        apis: tuple[Stack, Stack, Stack], publishing: None) -> None:
    """An API whose streams also read the database every 50 ms while two writers commit 300
    events: a read that ran in the turn of a pushed message replaced the events of that
    message, which the cursor had counted as sent (one transaction's events lost every 10 s
    on a busy campaign, on every stream)."""
    _, _, quick = apis
    team = create_team_in_db(quick, f"sse-{secrets.token_hex(3)}")
    campaign_id = _campaign_of(quick, team)
    readers = [Reader(quick, team.key, campaign_id) for _ in range(4)]
    for reader in readers:
        assert reader.opened.wait(10)
    wait_until(lambda: all(r.ids for r in readers), 30, "the streams' first event", quick)

    def writer(name: str) -> None:
        for i in range(150):
            note(quick.db_url, campaign_id, writer=name, i=i)
            time.sleep(0.004)

    writers = [threading.Thread(target=writer, args=(n,)) for n in "ab"]
    for w in writers:
        w.start()
    for w in writers:
        w.join()
    _finish(quick, campaign_id)
    expected = _event_ids(quick, campaign_id)
    for reader in readers:
        assert reader.result(30) == expected


def test_a_start_point_past_every_event_sends_no_pushed_event(
        apis: tuple[Stack, Stack, Stack], publishing: None) -> None:
    """``after=999999999`` on a running campaign: the read sends nothing (no event has such an
    id) and neither does the push (it sent every live event); the stream ends once the
    campaign has finished."""
    st, _, _ = apis
    team = create_team_in_db(st, f"sse-{secrets.token_hex(3)}")
    campaign_id = _campaign_of(st, team)
    far = Reader(st, team.key, campaign_id, params={"after": 999_999_999})
    near = Reader(st, team.key, campaign_id)
    wait_until(lambda: bool(near.ids), 30, "the first event", st)
    assert far.opened.wait(10)
    time.sleep(0.3)  # both registered and read
    for i in range(5):
        note(st.db_url, campaign_id, i=i)
    _finish(st, campaign_id)
    assert near.result(30) == _event_ids(st, campaign_id)
    assert far.result(30) == []


def test_revoking_or_rotating_a_key_ends_its_open_streams_within_5_s(
        apis: tuple[Stack, Stack, Stack], publishing: None) -> None:
    """Streams opened with a key (with Redis, without, on a busy and an idle campaign) end
    within 5 s of its revocation, with a ``revoked`` event; a stream of another key of the team
    goes on. ``rotate-key`` revokes too. (They went on: 304 events in 30 s after a
    revocation.)"""
    from api.security import revoke_key, rotate_key

    st, no_redis, _ = apis
    team = create_team_in_db(st, f"sse-{secrets.token_hex(3)}")
    busy, idle = _campaign_of(st, team), _campaign_of(st, team)
    with session_scope(st.db_url) as s:
        # a second key of the team (the first is revoked below)
        from api.security import _new_key
        from core.models import Team

        team_row = s.scalar(select(Team).where(Team.name == team.name))
        assert team_row is not None
        other_key = _new_key(s, team_row)
    readers = [Reader(api, team.key, cid) for api in (st, no_redis) for cid in (busy, idle)]
    survivor = Reader(st, other_key, busy)
    wait_until(lambda: all(r.ids for r in [*readers, survivor]), 30, "every first event", st)
    stop = threading.Event()

    def writer() -> None:
        while not stop.is_set():
            note(st.db_url, busy, n=1)
            time.sleep(0.05)

    writing = threading.Thread(target=writer)
    writing.start()
    try:
        time.sleep(1.0)
        with session_scope(st.db_url) as s:
            revoke_key(s, prefix=team.key.split("_")[1])
        revoked_at = time.monotonic()
        for reader in readers:
            reader.result(10)
            assert reader.ended_at is not None
            assert reader.ended_at - revoked_at < 5.0, reader.ended_at - revoked_at
            assert reader.kinds[-1] == "revoked"
        assert survivor.is_alive()  # another key of the team: its stream goes on
        with session_scope(st.db_url) as s:
            rotate_key(s, team_name=team.name)  # revokes the other key too
        rotated_at = time.monotonic()
        survivor.result(10)
        assert survivor.ended_at is not None
        assert survivor.ended_at - rotated_at < 5.0
        assert survivor.kinds[-1] == "revoked"
    finally:
        stop.set()
        writing.join()
    with st.client(team.key) as client:
        assert client.get(f"/campaigns/{busy}/events").status_code == 401


def test_start_points_past_2_31_are_event_ids_like_any_other(
        apis: tuple[Stack, Stack, Stack], publishing: None) -> None:
    """``?after=`` and ``Last-Event-ID`` take any id up to 2^63-1 (the schema's bound), and
    event ids grow past 2^31: a stream from 2^31 got its 200, then broke on the 32-bit
    ``events.id`` (NumericValueOutOfRange). Last in the module: it moves the id sequence of
    the module's database past 2^31."""
    st, no_redis, _ = apis
    team = create_team_in_db(st, f"sse-{secrets.token_hex(3)}")
    campaign_id = _campaign_of(st, team)
    far = Reader(st, team.key, campaign_id, params={"after": 2**62})
    wait_until(lambda: far.opened.is_set(), 10, "the stream from 2^62", st)
    with session_scope(st.db_url) as s:
        s.execute(text("SELECT setval('events_id_seq', :at)"), {"at": 2**31 + 10})
    for i in range(3):
        note(st.db_url, campaign_id, i=i)
    _finish(st, campaign_id)
    ids = _event_ids(st, campaign_id)
    assert ids[-4:][0] > 2**31
    assert far.result(30) == []
    for api in (st, no_redis):
        assert Reader(api, team.key, campaign_id, params={"after": 2**31}).result(20) \
            == ids[-4:]
        assert Reader(api, team.key, campaign_id,
                      headers={"Last-Event-ID": str(ids[-3])}).result(20) == ids[-2:]
