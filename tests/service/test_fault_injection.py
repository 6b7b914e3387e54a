"""Fault injection with real processes on a private stack (its own Postgres server, its own
Redis server, the API and Celery workers as subprocesses): GPU and compile worker processes
SIGKILLed mid-task, Redis and Postgres restarted mid-campaign, the API killed during
submissions, a compile that never ends. After each fault every campaign completes or fails
with a reason, no result is lost or written twice, and ``tuneforge db check`` finds nothing.

The GPU's own faults (illegal address, hang, a dead GPU child) are covered by
tests/test_gpu_eval.py.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import redis
from sqlalchemy import func, select

from core.db import get_engine, session_factory, session_scope, upgrade_database
from core.integrity import check
from core.models import Campaign, Candidate, Event, WorkerNode
from core.queues import MAX_EVALUATION_ATTEMPTS, TaskName, task_args
from core.statuses import CANDIDATE_IN_FLIGHT
from service.fault_stack import REVIVED, FaultStack, PrivatePostgres, PrivateRedis, fake_nvcc
from service.service_stack import (
    START_TIMEOUT_S,
    Stack,
    TeamKey,
    create_team_in_db,
    free_port,
    live_roles,
    service_env,
    wait_until,
)
from worker.jobs import SILENT_BEATS

SHAPE = {"m": 4096, "n": 4096, "k": 4096}
COMPILE_TIMEOUT_S = 3.0
#: Faults injected by this module, by kind (docs/RELIABILITY.md quotes the totals).
INJECTED: Counter[str] = Counter()


@pytest.fixture(scope="module")
def faults(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultStack]:
    """API, agent, compile and one replay GPU worker (an evaluation sleeps 4x its recorded
    GPU time: 0.5-1 s, the baseline's 3.3 s) on a private
    Postgres and Redis."""
    pg = PrivatePostgres.create()
    rds = PrivateRedis.create()
    home = tmp_path_factory.mktemp("fault-home")
    token = str(secrets.randbelow(900_000) + 100_000)  # digits: sleep takes "300.<token>"
    nvcc = fake_nvcc(home / "nvcc", token)
    port = free_port()
    api = f"http://127.0.0.1:{port}"
    env = service_env(pg.url, rds.url, home, api)
    env["TUNEFORGE_RECONCILE_S"] = "1"
    st = FaultStack(api=api, db_url=pg.url, redis_url=rds.url, env=env,
                    logs=tmp_path_factory.mktemp("fault-logs"))
    st.pg, st.redis, st.port, st.nvcc_token = pg, rds, port, token
    st.launched = {}
    try:
        upgrade_database(pg.url)
        st.start_api()
        st.start("agent", "worker", "--role", "agent", "--concurrency", "2")
        st.start("compile", "worker", "--role", "compile", "--concurrency", "1",
                 extra_env={"TUNEFORGE_NVCC": str(nvcc),
                            "TUNEFORGE_COMPILE_TIMEOUT_S": str(COMPILE_TIMEOUT_S)})
        st.start("gpu", "worker", "--role", "gpu", "--backend", "replay", "--gpus", "0",
                 "--replay-speed", "0.25")

        def workers_up() -> bool:
            roles = live_roles(st)
            return all(roles.get(r, 0) >= 1 for r in ("agent", "compile", "gpu"))

        wait_until(workers_up, START_TIMEOUT_S, "worker heartbeats", st, interval=0.3)
        yield st
    finally:
        st.stop_all()
        for pid in subprocess.run(["pgrep", "-f", f"sleep 300.{token}"], capture_output=True,
                                  text=True).stdout.split():  # the fake nvcc's sleeps only
            os.kill(int(pid), signal.SIGKILL)
        get_engine(pg.url).dispose()
        rds.destroy()
        pg.destroy()


@pytest.fixture(scope="module")
def team(faults: FaultStack) -> TeamKey:
    return create_team_in_db(faults, f"faults-{secrets.token_hex(3)}")


def submit(st: Stack, team: TeamKey, iterations: int, **extra: Any) -> str:
    """A campaign of the module's team that measures afresh: the faults strike evaluations,
    which the team's history would otherwise serve (the tests share one team)."""
    with st.client(team.key) as client:
        response = client.post("/campaigns", json={"shape": SHAPE,
                                                   "budget": {"iterations": iterations},
                                                   "fresh": True, **extra})
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def campaign_row(st: Stack, campaign_id: str) -> tuple[str, str | None, int]:
    with session_scope(st.db_url) as s:
        c = s.get(Campaign, campaign_id)
        assert c is not None
        return c.status, c.status_reason, c.evaluations


def wait_done(st: FaultStack, campaign_id: str, timeout: float = 120.0
              ) -> tuple[str, str | None]:
    def finished() -> tuple[str, str | None] | None:
        st.revive()
        try:
            status, reason, _ = campaign_row(st, campaign_id)
        except Exception:  # the database may be restarting
            return None
        return (status, reason) if status in ("done", "failed", "cancelled") else None
    return wait_until(finished, timeout, f"campaign {campaign_id} to finish", st,
                      interval=0.2)


def assert_every_result_once(st: Stack, campaign_id: str, budget: int) -> list[Candidate]:
    """Every candidate finished, one result each; the counters agree; db check is clean."""
    with session_scope(st.db_url) as s:
        cands = list(s.scalars(select(Candidate).where(Candidate.campaign_id == campaign_id)))
        results = Counter(e.payload["candidate_id"] for e in s.scalars(
            select(Event).where(Event.campaign_id == campaign_id, Event.kind == "result")))
        campaign = s.get(Campaign, campaign_id)
        assert campaign is not None
        evaluations = campaign.evaluations
        findings = check(s)
        s.expunge_all()
    assert [c.id for c in cands if c.status in CANDIDATE_IN_FLIGHT] == []
    assert len(cands) == budget
    assert sorted(c.iteration for c in cands) == list(range(budget))  # none twice, none lost
    assert len({c.params_key for c in cands}) == budget
    assert results == Counter({c.id: 1 for c in cands})  # each result recorded exactly once
    assert evaluations == budget
    assert all(c.feedback is not None for c in cands)
    assert findings == [], findings
    return cands


@pytest.mark.slow
def test_ten_gpu_worker_kills_mid_evaluation_lose_nothing(faults: FaultStack,
                                                          team: TeamKey) -> None:
    budget = 16
    campaign_id = submit(faults, team, budget)
    killed: set[str] = set()  # evaluations redelivered after our kill (then left alone)
    crash_me: str | None = None  # one more candidate, killed on every delivery
    crashed: str | None = None

    def measuring() -> tuple[str, int] | None:
        with session_scope(faults.db_url) as s:
            row = s.execute(select(Candidate.id, Candidate.attempts).where(
                Candidate.campaign_id == campaign_id, Candidate.status == "measuring")).first()
        return (row[0], row[1]) if row is not None else None

    def now(cid: str) -> tuple[int, str]:
        with session_scope(faults.db_url) as s:
            cand = s.get(Candidate, cid)
            assert cand is not None
            return cand.attempts, cand.status

    deadline = time.monotonic() + 200
    while (len(killed) < 10 or crashed is None) and time.monotonic() < deadline:
        if campaign_row(faults, campaign_id)[0] in ("done", "failed", "cancelled"):
            break
        found = measuring()
        if found is None:
            time.sleep(0.03)
            continue
        cid, attempts = found
        if attempts == 1 and cid not in killed and cid != crash_me:
            if crash_me is None and crashed is None and len(killed) >= 5:
                crash_me = cid
        elif not (attempts == 2 and cid == crash_me):
            time.sleep(0.03)
            continue
        pool = faults.pool("gpu")
        time.sleep(0.1)  # inside the evaluation (0.5 s or more)
        if measuring() != (cid, attempts):
            continue
        os.kill(pool, signal.SIGKILL)
        wait_until(lambda cid=cid, a=attempts: now(cid)[0] > a
                   or now(cid)[1] not in CANDIDATE_IN_FLIGHT,
                   60, f"candidate {cid} to be delivered again", faults)
        after, status = now(cid)
        if after == attempts:  # it finished just before the kill: the kill hit nothing
            if cid == crash_me:
                crash_me = None
                if attempts == 2:
                    killed.add(cid)
            continue
        INJECTED["gpu worker SIGKILL mid-evaluation"] += 1
        if after > MAX_EVALUATION_ATTEMPTS:
            crashed = cid
        elif cid != crash_me:
            killed.add(cid)

    status, reason = wait_done(faults, campaign_id)
    assert len(killed) >= 10, killed
    assert crashed is not None
    assert status == "done", reason
    cands = {c.id: c for c in assert_every_result_once(faults, campaign_id, budget)}
    for cid in killed:  # redelivered once, measured once, not crashed
        assert cands[cid].attempts == 2, cands[cid].error
        assert cands[cid].status != "crashed"
    victim = cands[crashed]
    assert victim.status == "crashed"
    assert victim.attempts == MAX_EVALUATION_ATTEMPTS + 1
    assert f"{MAX_EVALUATION_ATTEMPTS} times" in (victim.error or "")
    assert victim.iteration > 0  # not the baseline: the campaign went on after it
    assert max(c.iteration for c in cands.values()) > victim.iteration
    assert all(c.attempts <= 1 for c in cands.values() if c.id not in {*killed, crashed})


def unacked_naming(st: Stack, candidate_id: str) -> int:
    """Messages delivered and not acknowledged (Redis's ``unacked`` hash) that name the
    candidate."""
    client = redis.Redis.from_url(st.redis_url)
    return sum(candidate_id.encode() in raw for raw in client.hvals("unacked"))


@pytest.mark.slow
def test_gpu_workers_killed_outright_give_their_candidates_back_at_once(
        faults: FaultStack, team: TeamKey) -> None:
    """The whole GPU worker (main process and pool) SIGKILLed mid-evaluation, as when its
    machine is lost: its message waits in Redis's ``unacked`` hash for the visibility
    timeout (an hour), but the agent sees the worker's heartbeats stop and sends the evaluation
    again, which a fresh worker measures within seconds. A candidate whose evaluation kills
    its worker outright every time is recorded ``crashed`` at the cap. The original messages,
    handed out again as Redis would an hour later, change nothing."""
    budget = 10
    campaign_id = submit(faults, team, budget)
    silent_s = SILENT_BEATS * float(faults.env["TUNEFORGE_HEARTBEAT_S"])

    def measuring(exclude: set[str]) -> tuple[str, int, str | None] | None:
        with session_scope(faults.db_url) as s:
            row = s.execute(select(Candidate.id, Candidate.attempts, Candidate.claimed_by)
                            .where(Candidate.campaign_id == campaign_id,
                                   Candidate.status == "measuring",
                                   Candidate.iteration > 0,
                                   Candidate.id.not_in(exclude or {""}))).first()
        return (row[0], row[1], row[2]) if row is not None else None

    def state(cid: str) -> tuple[int, str, str | None]:
        with session_scope(faults.db_url) as s:
            cand = s.get(Candidate, cid)
            assert cand is not None
            return cand.attempts, cand.status, cand.claimed_by

    def gpu_nodes() -> set[str]:
        with session_scope(faults.db_url) as s:
            return set(s.scalars(select(WorkerNode.node).where(WorkerNode.role == "gpu")))

    def kill_while_measuring(cid: str, attempts: int) -> bool:
        """Kill the GPU worker outright while it measures ``cid``; False if it finished
        first."""
        time.sleep(0.1)  # inside the evaluation (0.5 s or more)
        faults.kill_outright("gpu")
        now_attempts, status, claimed_by = state(cid)
        faults.start_again("gpu")  # a replacement worker (another machine)
        if (now_attempts, status) != (attempts, "measuring"):
            return False
        assert (claimed_by or "").startswith("gpu@")
        INJECTED["GPU worker killed outright (main and pool) mid-evaluation"] += 1
        return True

    # 1. one candidate's worker killed outright: measured again within seconds
    recovered_s: list[float] = []
    killed: list[str] = []
    while len(killed) < 2:
        found = wait_until(lambda: measuring(set(killed)), 60, "an evaluation", faults,
                           interval=0.02)
        cid, attempts, node = found
        assert node in gpu_nodes()  # claimed for the worker that heartbeats
        if attempts != 1 or not kill_while_measuring(cid, attempts):
            continue
        assert unacked_naming(faults, cid) == 1  # held by the dead worker for an hour
        started = time.monotonic()
        wait_until(lambda cid=cid: state(cid)[1] not in CANDIDATE_IN_FLIGHT, 60,
                   f"candidate {cid} to be measured by the fresh worker", faults)
        recovered_s.append(time.monotonic() - started)
        killed.append(cid)

    # 2. a candidate that kills its worker outright on every delivery: crashed at the cap
    crash_me: str | None = None
    tried: set[str] = set(killed)
    while crash_me is None:
        cid, attempts, _node = wait_until(lambda: measuring(tried), 60, "an evaluation",
                                          faults, interval=0.02)
        tried.add(cid)
        if attempts != 1 or not kill_while_measuring(cid, attempts):
            continue
        for delivery in range(2, MAX_EVALUATION_ATTEMPTS + 1):
            wait_until(lambda d=delivery, cid=cid: state(cid)[0] == d, 60,
                       f"delivery {delivery} of {cid}", faults, interval=0.02)
            if not kill_while_measuring(cid, delivery):
                break  # it finished first: try another candidate
        else:
            crash_me = cid

    status, reason = wait_done(faults, campaign_id)
    assert status == "done", reason
    cands = {c.id: c for c in assert_every_result_once(faults, campaign_id, budget)}
    for cid in killed:
        assert cands[cid].attempts == 2
        assert cands[cid].status != "crashed", cands[cid].error
    victim = cands[crash_me]
    assert victim.status == "crashed"
    assert victim.attempts == MAX_EVALUATION_ATTEMPTS + 1
    assert f"{MAX_EVALUATION_ATTEMPTS} times" in (victim.error or "")
    assert all(c.claimed_by is None for c in cands.values())  # nobody holds anything
    # seconds from the kill to the candidate's result: the dead worker's silence
    # (3 heartbeats), the fresh worker's start and the evaluation; the visibility timeout
    # would have been an hour
    assert max(recovered_s) < silent_s + 30, recovered_s
    sys.stderr.write(f"\noutright kills: candidates measured again "
                     f"{', '.join(f'{t:.1f}' for t in recovered_s)} s after the kill\n")

    # 3. the dead workers' original messages, handed out again (as Redis does once the
    # visibility timeout passes): every one is a no-op
    held = [*killed, crash_me]
    assert sum(unacked_naming(faults, cid) for cid in held) >= len(killed) + \
        MAX_EVALUATION_ATTEMPTS
    with session_scope(faults.db_url) as s:
        events_before = s.scalar(select(func.count()).select_from(Event).where(
            Event.campaign_id == campaign_id))
    from kombu import Connection

    with Connection(faults.redis_url, transport_options={"visibility_timeout": 0}) as conn:
        conn.default_channel.qos.restore_visible(num=100)
    client = redis.Redis.from_url(faults.redis_url)
    wait_until(lambda: client.hlen("unacked") == 0 and client.llen("gpu.sm_90") == 0, 30,
               "the restored messages to be taken and acknowledged", faults)
    time.sleep(1.0)  # a report they might (wrongly) send would be recorded by now
    with session_scope(faults.db_url) as s:
        assert s.scalar(select(func.count()).select_from(Event).where(
            Event.campaign_id == campaign_id)) == events_before
        for cid in held:
            cand = s.get(Candidate, cid)
            assert cand is not None
            assert cand.attempts == cands[cid].attempts  # not taken again
    assert_every_result_once(faults, campaign_id, budget)


@pytest.mark.slow
def test_an_agent_killed_outright_holding_a_result_gives_it_back(
        faults: FaultStack, team: TeamKey) -> None:
    """The agent's whole tree SIGKILLed while it holds an ``agent.measured`` (this test holds
    the campaign's row lock, so the agent's step waits on it with the message taken): the
    measurement lives only in that message, which Redis would hand out again after an hour. A
    fresh agent sees the dead one's heartbeats stop, hands its messages out again, and the
    campaign completes with every result once."""
    budget = 6
    campaign_id = submit(faults, team, budget)
    wait_until(lambda: campaign_row(faults, campaign_id)[2] >= 2, 60, "2 evaluations", faults)
    client = redis.Redis.from_url(faults.redis_url)

    def agent_holds_a_result() -> bool:
        """An ``agent.measured`` of this campaign taken and not acknowledged (one of an earlier
        test's campaign, taken and acknowledged meanwhile, would not stay held by the kill)."""
        with session_scope(faults.db_url) as s:
            ours = set(s.scalars(select(Candidate.id).where(
                Candidate.campaign_id == campaign_id)))
        for raw in client.hvals("unacked"):
            message, _exchange, routing_key = json.loads(raw)
            if (routing_key == "agent"
                    and (message.get("headers") or {}).get("task") == TaskName.MEASURED
                    and task_args(message)[:1] and task_args(message)[0] in ours):
                return True
        return False

    blocker = session_factory(faults.db_url)()
    try:
        blocker.execute(select(Campaign.id).where(Campaign.id == campaign_id)
                        .with_for_update())  # the agent's next step waits for this lock
        wait_until(agent_holds_a_result, 60, "the agent to hold a measurement", faults,
                   interval=0.05)
        faults.kill_outright("agent")
        INJECTED["agent killed outright (main and pool) holding a result"] += 1
    finally:
        blocker.rollback()
        blocker.close()
    killed_at = time.monotonic()
    held = agent_holds_a_result()  # held by the dead agent: Redis would wait an hour
    faults.start_again("agent")  # first, so that a failure leaves the module's stack whole
    assert held
    status, reason = wait_done(faults, campaign_id, timeout=90)
    took = time.monotonic() - killed_at
    assert status == "done", reason
    assert_every_result_once(faults, campaign_id, budget)
    assert took < 60, took  # not the visibility timeout's hour
    assert not agent_holds_a_result()
    sys.stderr.write(f"\nagent killed outright: its campaign done {took:.1f} s later\n")


def test_a_gpu_worker_killed_outright_after_taking_a_message_before_its_claim(
        faults: FaultStack, team: TeamKey) -> None:
    """The GPU worker's pool process stopped (SIGSTOP) while the baseline compiles: its main
    process takes the evaluation off the queue (into Redis's ``unacked`` hash) and hands it to
    a pool that never runs it, so the candidate stays ``compiled`` and unclaimed. Then the
    whole worker is SIGKILLed and a fresh one started. The agent sees the dead node's silence
    and hands the message out again: measured within seconds, where it waited for the
    visibility timeout (an hour; six minutes later it was still ``compiled``). Twice: once
    with the campaign left to finish, once cancelled meanwhile (``db check`` found the
    straggler ``in_flight_after_finish``)."""
    silent_s = SILENT_BEATS * float(faults.env["TUNEFORGE_HEARTBEAT_S"])
    for cancel in (False, True):
        pool = faults.pool("gpu")
        os.kill(pool, signal.SIGSTOP)
        try:
            campaign_id = submit(faults, team, 3)

            def compiled_and_taken(campaign_id: str = campaign_id) -> str | None:
                with session_scope(faults.db_url) as s:
                    row = s.execute(select(Candidate.id, Candidate.claimed_by).where(
                        Candidate.campaign_id == campaign_id,
                        Candidate.status == "compiled")).first()
                return row[0] if row is not None and row[1] is None \
                    and unacked_naming(faults, row[0]) == 1 else None

            cid = wait_until(compiled_and_taken, 60, "the evaluation taken, not claimed",
                             faults, interval=0.05)
            time.sleep(0.5)
            assert compiled_and_taken() == cid  # the stopped pool never claims it
        finally:
            faults.kill_outright("gpu")  # SIGKILL ends a stopped process as well
        killed_at = time.monotonic()
        INJECTED["GPU worker killed outright after taking a message, before the claim"] += 1
        faults.start_again("gpu")
        if cancel:
            with faults.client(team.key) as client:
                assert client.post(f"/campaigns/{campaign_id}/cancel").status_code == 200

        def measured(cid: str = cid) -> bool:
            with session_scope(faults.db_url) as s:
                cand = s.get(Candidate, cid)
                return cand is not None and cand.status not in CANDIDATE_IN_FLIGHT
        wait_until(measured, silent_s + 45, f"candidate {cid} to be measured", faults)
        took = time.monotonic() - killed_at
        status, reason = wait_done(faults, campaign_id)
        assert took < silent_s + 30, took
        with session_scope(faults.db_url) as s:
            cand = s.get(Candidate, cid)
            assert cand is not None
            assert (cand.status, cand.attempts, cand.claimed_by) == ("ok", 1, None)
            in_flight = s.scalar(select(func.count()).select_from(Candidate).where(
                Candidate.campaign_id == campaign_id,
                Candidate.status.in_(CANDIDATE_IN_FLIGHT)))
            findings = check(s)
        assert in_flight == 0
        assert findings == [], findings
        if cancel:
            assert status == "cancelled", reason
        else:
            assert status == "done", reason
            assert_every_result_once(faults, campaign_id, 3)
        sys.stderr.write(f"\ntaken, not claimed{', cancelled' if cancel else ''}: measured "
                         f"{took:.1f} s after the kill\n")


def test_a_compile_killed_mid_run_then_never_ending_is_killed_at_the_limit(
        faults: FaultStack, team: TeamKey) -> None:
    # a campaign of the GPU backend: its compile runs nvcc (here a fake that never ends)
    from agent.engine import lifecycle

    with session_scope(faults.db_url) as s:
        campaign = lifecycle.create_campaign(
            s, lifecycle.CampaignSpec(budget_iterations=3, team_id=_team_id(faults, team)),
            backend="gpu")
        campaign_id = campaign.id
    _send_decide(faults, campaign_id)

    def compiling() -> str | None:
        with session_scope(faults.db_url) as s:
            return s.scalar(select(Candidate.id).where(Candidate.campaign_id == campaign_id,
                                                       Candidate.status == "compiling"))
    cid = wait_until(compiling, 30, "the baseline to be compiling", faults)
    pool = faults.pool("compile")
    time.sleep(0.5)  # nvcc is running
    os.kill(pool, signal.SIGKILL)  # the compile worker's process dies mid-compile
    INJECTED["compile worker SIGKILL mid-compile"] += 1
    started = time.monotonic()
    status, reason = wait_done(faults, campaign_id, timeout=60)
    took = time.monotonic() - started
    with session_scope(faults.db_url) as s:
        cand = s.get(Candidate, cid)
        assert cand is not None
        cand_status, error = cand.status, cand.error
        findings = check(s)
    assert cand_status == "compile_timeout", error
    assert f"nvcc killed after {COMPILE_TIMEOUT_S:g} s" in (error or "")
    assert status == "failed"
    assert "compile_timeout" in (reason or "")  # the campaign says why
    assert took < COMPILE_TIMEOUT_S + 30  # killed at the limit, not at the task's hard limit
    assert findings == []
    INJECTED["compile that never ends"] += 1


def _team_id(st: Stack, team: TeamKey) -> str:
    from api.security import authenticate
    with session_scope(st.db_url) as s:
        who = authenticate(s, key=team.key)
    assert not isinstance(who, str)
    return who.team_id


def _send_decide(st: Stack, campaign_id: str) -> None:
    from core.queues import make_app
    from core.settings import Settings
    make_app(Settings(redis_url=st.redis_url)).send_task(
        str(TaskName.DECIDE), args=[campaign_id], queue="agent")


def test_redis_restart_mid_campaign(faults: FaultStack, team: TeamKey) -> None:
    budget = 12
    campaign_id = submit(faults, team, budget)
    wait_until(lambda: campaign_row(faults, campaign_id)[2] >= 3, 60, "3 evaluations", faults)
    faults.redis.stop()  # every queued message, guard and running task's message is lost
    time.sleep(2.0)
    faults.redis.start()
    INJECTED["Redis restart (no persistence)"] += 1
    status, reason = wait_done(faults, campaign_id)
    assert status == "done", reason
    assert_every_result_once(faults, campaign_id, budget)


def test_postgres_restart_mid_campaign(faults: FaultStack, team: TeamKey) -> None:
    budget = 12
    campaign_id = submit(faults, team, budget)
    wait_until(lambda: campaign_row(faults, campaign_id)[2] >= 3, 60, "3 evaluations", faults)
    faults.pg.stop()  # immediate: every connection of every process breaks
    time.sleep(2.0)
    faults.pg.start()
    INJECTED["Postgres restart (immediate stop)"] += 1
    status, reason = wait_done(faults, campaign_id)
    assert status == "done", reason
    assert_every_result_once(faults, campaign_id, budget)


def test_api_killed_during_submissions(faults: FaultStack, team: TeamKey) -> None:
    with session_scope(faults.db_url) as s:
        before = set(s.scalars(select(Campaign.id)))
    accepted: list[str] = []
    refused: list[str] = []

    def post() -> None:
        with faults.client(team.key) as client:
            for _ in range(20):
                try:
                    r = client.post("/campaigns", json={"shape": SHAPE,
                                                        "budget": {"iterations": 1}})
                except httpx.TransportError as exc:
                    refused.append(type(exc).__name__)
                    return
                assert r.status_code in (201, 500, 503), r.text
                if r.status_code == 201:
                    accepted.append(r.json()["id"])
    threads = [threading.Thread(target=post) for _ in range(4)]
    for t in threads:
        t.start()
    wait_until(lambda: len(accepted) >= 3, 30, "the first submissions", faults, interval=0.01)
    faults.procs["api"].kill()  # SIGKILL while requests are in flight
    INJECTED["API SIGKILL during submissions"] += 1
    for t in threads:
        t.join(30)
    faults.procs.pop("api").wait()
    faults.start_api()
    assert refused, "the API died after every submission: the kill hit nothing"
    with session_scope(faults.db_url) as s:
        created = set(s.scalars(select(Campaign.id))) - before
    assert set(accepted) <= created  # every 201 is a campaign
    for campaign_id in created:  # including those committed whose answer was lost
        status, reason = wait_done(faults, campaign_id, timeout=90)
        assert status == "done", (campaign_id, reason)
    with session_scope(faults.db_url) as s:
        assert check(s) == []
        assert s.scalar(select(func.count()).select_from(Campaign).where(
            Campaign.status.in_(("queued", "running")))) == 0


def test_db_check_is_clean_after_every_fault(faults: FaultStack) -> None:
    done = faults.tuneforge("db", "check")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "database consistent" in done.stderr
    summary = ", ".join(f"{k}: {v}" for k, v in sorted(INJECTED.items()))
    revived = ", ".join(f"{k}: {v}" for k, v in sorted(REVIVED.items())) or "none"
    sys.stderr.write(f"\nfaults injected: {summary}; processes restarted by the "
                     f"supervisor: {revived}\n")
