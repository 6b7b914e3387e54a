"""Reliability: a candidate that kills its GPU worker twice is recorded ``crashed`` (real Celery
worker processes, killed for real); the Celery settings every task relies on."""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import redis
from sqlalchemy import select

from agent.engine import lifecycle, locking, recording
from agent.tasks import LOST_CHECK_BEATS
from core.db import session_scope
from core.integrity import check
from core.models import Campaign, Candidate, WorkerNode, utcnow
from core.queues import (
    MAX_EVALUATION_ATTEMPTS,
    ROUTES,
    CeleryQueue,
    TaskName,
    make_app,
    time_limits,
    visibility_timeout,
)
from core.settings import Settings
from core.statuses import CANDIDATE_IN_FLIGHT
from kernels import get_family
from service.service_stack import ROOT, Stack, wait_until
from worker.evaluate import ReplayEvaluator
from worker.jobs import replay_dataset

CRASH_QUEUE = "gpu.crashtest"


def pool_children(pid: int) -> list[int]:
    """Live child processes of ``pid`` (the Celery pool)."""
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


def test_a_candidate_that_kills_its_worker_twice_is_recorded_crashed(
        stack: Stack, tmp_path: Path) -> None:
    # a compiled baseline, as the agent leaves it for the GPUs
    with session_scope(stack.db_url) as s:
        campaign = lifecycle.create_campaign(s, lifecycle.CampaignSpec(budget_iterations=5),
                                             backend="replay")
        (baseline,) = lifecycle.start_campaign(s, campaign.id)
        family = get_family("gemm_bias_relu")
        compiled = ReplayEvaluator(family, replay_dataset("gemm_bias_relu")).compile(
            family.params_from_dict(baseline.params)).result()
        recording.record_compile(s, baseline.id, compiled)
        campaign_id, candidate_id = campaign.id, baseline.id

    # a GPU worker whose replay takes "forever" (the recorded seconds / 1e-5)
    env = {**stack.env, "TUNEFORGE_WORKER_ROLE": "gpu", "TUNEFORGE_REPLAY_SPEED": "0.00001"}
    log = (tmp_path / "crash-worker.log").open("wb")
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "core.queues", "worker", "-Q", CRASH_QUEUE,
         "-c", "1", "-n", "crash@%h", "--pool", "prefork", "-l", "INFO",
         "--without-gossip", "--without-mingle"],
        env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    try:
        # sent as the agent sends it: through the enqueue guard (so that the reconciler does
        # not send it to the regular GPU workers), to the crash worker's queue
        guard = f"tuneforge:sent:{TaskName.EVALUATE}:{candidate_id}"
        assert redis.Redis.from_url(stack.redis_url).set(guard, b"1", nx=True, ex=600)
        sender = make_app(Settings(redis_url=stack.redis_url))
        sender.send_task(str(TaskName.EVALUATE), args=[candidate_id], queue=CRASH_QUEUE)

        def attempts() -> int:
            with session_scope(stack.db_url) as s:
                cand = s.get(Candidate, candidate_id)
                assert cand is not None
                return cand.attempts

        for delivery in range(1, MAX_EVALUATION_ATTEMPTS + 1):
            wait_until(lambda d=delivery: attempts() == d, 60,
                       f"delivery {delivery} of the evaluation", stack)
            children = wait_until(lambda: pool_children(worker.pid), 30, "the pool process")
            for child in children:
                os.kill(child, signal.SIGKILL)  # the evaluation takes its worker down

        def recorded() -> Candidate | None:
            with session_scope(stack.db_url) as s:
                cand = s.get(Candidate, candidate_id)
                return cand if cand is not None and cand.status == "crashed" else None

        cand = wait_until(recorded, 60, "the candidate to be recorded crashed", stack)
        with session_scope(stack.db_url) as s:
            final = s.get(Campaign, campaign_id)
            assert final is not None
            status, reason = final.status, final.status_reason
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(20)
        except subprocess.TimeoutExpired:
            worker.kill()
        log.close()
    assert cand.attempts == MAX_EVALUATION_ATTEMPTS + 1
    assert "2 times" in (cand.error or "")
    assert status == "failed"  # the baseline itself crashed: nothing to tune from
    assert "crashed" in (reason or "")
    assert "WorkerLostError" in (tmp_path / "crash-worker.log").read_text()


def test_celery_settings_make_tasks_safe_to_redeliver() -> None:
    settings = Settings(redis_url="redis://127.0.0.1:6379/15")
    app = make_app(settings)
    import agent.tasks  # noqa: F401  (registers the tasks)
    import worker.tasks  # noqa: F401

    conf = app.conf
    assert conf.task_acks_late is True
    assert conf.task_reject_on_worker_lost is True
    assert conf.task_acks_on_timeout is False
    assert conf.worker_prefetch_multiplier == 1
    limits = time_limits(settings)
    assert set(limits) == set(TaskName)
    for name, (soft, hard) in limits.items():
        annotation = conf.task_annotations[name]
        assert annotation == {"soft_time_limit": soft, "time_limit": hard}
        assert 0 < soft < hard
    assert conf.broker_transport_options["visibility_timeout"] > max(
        hard for _soft, hard in limits.values())
    assert visibility_timeout(settings) == conf.broker_transport_options["visibility_timeout"]
    from core.queues import app as service_app

    registered = set(service_app.tasks)
    assert {str(n) for n in TaskName} <= registered
    assert ROUTES[TaskName.COMPILE] == CeleryQueue.COMPILE
    assert all(ROUTES[n] == CeleryQueue.AGENT
               for n in (TaskName.DECIDE, TaskName.COMPILED, TaskName.MEASURED))


@pytest.mark.parametrize("name", list(TaskName))
def test_every_task_has_a_soft_and_hard_limit_when_registered(name: TaskName) -> None:
    import agent.tasks  # noqa: F401
    import worker.tasks  # noqa: F401
    from core.queues import app as service_app

    task = service_app.tasks[str(name)]
    annotation = service_app.conf.task_annotations[str(name)]
    assert annotation["soft_time_limit"] < annotation["time_limit"]
    assert task.acks_late is True


def test_a_campaign_whose_enqueue_was_lost_is_picked_up(stack: Stack) -> None:
    # committed but never enqueued (the API lost Redis right after its commit)
    with session_scope(stack.db_url) as s:
        campaign = lifecycle.create_campaign(s, lifecycle.CampaignSpec(budget_iterations=3),
                                             backend="replay")
        campaign_id = campaign.id

    def finished() -> str | None:
        with session_scope(stack.db_url) as s:
            found = s.get(Campaign, campaign_id)
            assert found is not None
            return found.status if found.status in ("done", "failed") else None

    assert wait_until(finished, 30, "the reconciler to start the campaign", stack) == "done"


@pytest.mark.parametrize("status", ["pending", "compiled"])
def test_a_waiting_candidate_whose_message_was_lost_is_sent_again(stack: Stack,
                                                                  status: str) -> None:
    # seen by hand: a GPU worker killed outright (SIGKILL of its process group) while it took
    # an evaluation off the queue, before it claimed the candidate: the message was in no
    # queue and in no ``unacked`` hash, the candidate stayed ``compiled`` with no claim, and
    # decide's re-plan sent nothing (the step's enqueue guard lasts a day): the campaign stood
    # at 399 of 400 evaluations. Here: the baseline waiting for its compile or its evaluation,
    # its step sent (the guard is set) and the message gone
    rp_family = get_family("gemm_bias_relu")
    with session_scope(stack.db_url) as s:
        campaign = lifecycle.create_campaign(s, lifecycle.CampaignSpec(budget_iterations=1),
                                             backend="replay")
        (baseline,) = lifecycle.start_campaign(s, campaign.id)
        campaign_id, candidate_id = campaign.id, baseline.id
    step = TaskName.COMPILE
    if status == "compiled":
        evaluator = ReplayEvaluator(rp_family, replay_dataset("gemm_bias_relu"))
        compiled = evaluator.compile(rp_family.baseline).result()
        with session_scope(stack.db_url) as s:
            recording.record_compile(s, candidate_id, compiled)
            cand = s.get(Candidate, candidate_id)
            assert cand is not None
            assert cand.status == "compiled"
        step = TaskName.EVALUATE
    redis.Redis.from_url(stack.redis_url).set(f"tuneforge:sent:{step}:{candidate_id}", b"1",
                                              ex=600)

    def finished() -> str | None:
        with session_scope(stack.db_url) as s:
            found = s.get(Campaign, campaign_id)
            assert found is not None
            return found.status if found.status in ("done", "failed") else None

    assert wait_until(finished, 40, "the reconciler to send the lost step again",
                      stack) == "done"
    with session_scope(stack.db_url) as s:
        cand = s.get(Candidate, candidate_id)
        assert cand is not None
        assert (cand.status, cand.attempts) == ("ok", 1)


@pytest.mark.parametrize("status", ["pending", "compiled", "measuring"])
@pytest.mark.parametrize("campaign_state", ["busy", "cancelled"])
def test_a_lost_step_is_sent_again_while_the_campaign_goes_on_or_after_a_cancel(
        stack: Stack, status: str, campaign_state: str) -> None:
    """A candidate whose step's message was lost (a compile worker killed between its record
    and its enqueue, an agent killed between its commit and its enqueue; ``measuring``: a
    GPU task whose report met Redis away, dropped by Celery with the candidate still claimed
    by its live worker, as the fault run found) while its campaign still writes events on its
    other slots, or after the campaign was cancelled: sent again within a few heartbeat
    periods. The reconciler looked only at campaigns that had been quiet for
    ``TUNEFORGE_RECONCILE_S`` (60 s; a campaign going on ran a slot short meanwhile) and at
    running ones (a cancelled campaign's straggler stayed in flight: ``db check``'s
    ``in_flight_after_finish``)."""
    rp_family = get_family("gemm_bias_relu")
    with session_scope(stack.db_url) as s:
        # measured afresh: the step is what the test loses (the history would serve it)
        campaign = lifecycle.create_campaign(
            s, lifecycle.CampaignSpec(budget_iterations=1, reuse=False), backend="replay")
        (baseline,) = lifecycle.start_campaign(s, campaign.id)
        campaign_id, candidate_id = campaign.id, baseline.id
    step = TaskName.COMPILE
    if status in ("compiled", "measuring"):
        evaluator = ReplayEvaluator(rp_family, replay_dataset("gemm_bias_relu"))
        compiled = evaluator.compile(rp_family.baseline).result()
        with session_scope(stack.db_url) as s:
            recording.record_compile(s, candidate_id, compiled)
        step = TaskName.EVALUATE
    if status == "measuring":  # taken by a live GPU worker, whose task was then dropped
        with session_scope(stack.db_url) as s:
            node = s.scalars(select(WorkerNode.node).where(WorkerNode.role == "gpu")
                             .order_by(WorkerNode.last_seen.desc())).first()
            cand = s.get(Candidate, candidate_id)
            assert cand is not None
            assert node is not None
            cand.status, cand.attempts, cand.claimed_by = "measuring", 1, node
    redis.Redis.from_url(stack.redis_url).set(f"tuneforge:sent:{step}:{candidate_id}", b"1",
                                              ex=600)
    if campaign_state == "cancelled":
        with session_scope(stack.db_url) as s:
            lifecycle.cancel_campaign(s, campaign_id)
    heartbeat_s = float(stack.env["TUNEFORGE_HEARTBEAT_S"])
    started = time.monotonic()

    def recorded() -> bool:
        if campaign_state == "busy":  # events on the campaign's other slots: never quiet
            with session_scope(stack.db_url) as s:
                locking.lock_campaign(s, campaign_id)
                locking.emit(s, campaign_id, "note", {"other": "slot"})
        with session_scope(stack.db_url) as s:
            cand = s.get(Candidate, candidate_id)
            assert cand is not None
            return cand.status not in CANDIDATE_IN_FLIGHT

    wait_until(recorded, 30, "the lost step to be sent again", stack, interval=0.3)
    took = time.monotonic() - started
    # two looks a period apart (2 heartbeats), then compile and measure: within 6 periods
    assert took < 6 * LOST_CHECK_BEATS * heartbeat_s, took
    with session_scope(stack.db_url) as s:
        cand = s.get(Candidate, candidate_id)
        assert cand is not None
        delivered = 2 if status == "measuring" else 1
        assert (cand.status, cand.attempts, cand.claimed_by) == ("ok", delivered, None)
        camp = s.get(Campaign, campaign_id)
        assert camp is not None
        findings = [f for f in check(s) if campaign_id in str(f) or candidate_id in str(f)]
    assert findings == [], findings
    if campaign_state == "cancelled":
        assert camp.status == "cancelled"


def _done_gpu_campaign_with_best(stack: Stack, claimed_by: str | None) -> str:
    """A GPU-backend campaign asking for the sanitizer gate, done 10 s ago with a correct best
    kernel that has no gate record: as the agent leaves it when its ``worker.sanitize`` is
    lost (``claimed_by`` None), or taken by a worker (``claimed_by``). The id of the best."""
    with session_scope(stack.db_url) as s:
        campaign = lifecycle.create_campaign(
            s, lifecycle.CampaignSpec(budget_iterations=1, sanitize=True), backend="gpu")
        (best,) = lifecycle.start_campaign(s, campaign.id)
        best.status, best.avg_us, best.source = "ok", 1000.0, "// the best kernel"
        best.claimed_by = claimed_by
        campaign.status, campaign.best_id, campaign.evaluations = "done", best.id, 1
        campaign.finished_at = utcnow() - dt.timedelta(seconds=10)
        return best.id


def _gate_record(stack: Stack, candidate_id: str) -> dict[str, Any] | None:
    with session_scope(stack.db_url) as s:
        cand = s.get(Candidate, candidate_id)
        assert cand is not None
        return cand.sanitizer if cand.claimed_by is None else None


def test_a_lost_or_abandoned_sanitizer_gate_is_sent_again(stack: Stack) -> None:
    # its message lost with the broker's (no message names it, nobody holds it); and one held
    # by a worker that no longer heartbeats (no worker_nodes row fresh): the reconciler sends
    # both again, and a GPU worker of this stack (replay: it cannot run compute-sanitizer)
    # records why it could not check them
    lost = _done_gpu_campaign_with_best(stack, claimed_by=None)
    abandoned = _done_gpu_campaign_with_best(stack, claimed_by="gpu@gone:1-deadbeef")
    for cid in (lost, abandoned):
        record = wait_until(lambda cid=cid: _gate_record(stack, cid), 60,
                            f"the gate of {cid} to be sent again and recorded", stack)
        assert record["status"] == "error"
        assert "replay worker cannot run compute-sanitizer" in record["error"]


def test_a_compile_whose_workers_die_outright_is_recorded_failed_at_the_cap(
        stack: Stack) -> None:
    # the baseline compiling on a worker that stopped heartbeating, whose compile has already
    # been given back MAX_RELEASES times: the reconciler records the compile's failure instead
    # of sending it a fourth time
    from agent.tasks import MAX_RELEASES

    with session_scope(stack.db_url) as s:
        campaign = lifecycle.create_campaign(s, lifecycle.CampaignSpec(budget_iterations=3),
                                             backend="replay")
        (baseline,) = lifecycle.start_campaign(s, campaign.id)
        baseline.status, baseline.claimed_by = "compiling", "compile@gone:1-deadbeef"
        campaign_id, candidate_id = campaign.id, baseline.id
    redis.Redis.from_url(stack.redis_url).set(
        f"tuneforge:released:{TaskName.COMPILE}:{candidate_id}", MAX_RELEASES, ex=600)

    def final() -> tuple[str, str | None, str, str | None] | None:
        with session_scope(stack.db_url) as s:
            # the campaign first: each SELECT sees what was committed when it ran, and the
            # candidate's record commits with (or before) the campaign's end
            camp, cand = s.get(Campaign, campaign_id), s.get(Candidate, candidate_id)
            assert cand is not None
            assert camp is not None
            if camp.status not in ("done", "failed"):
                return None
            return cand.status, cand.error, camp.status, camp.status_reason

    status, error, campaign_status, reason = wait_until(
        final, 60, "the compile to be recorded as failed", stack)
    assert status == "compile_error"
    assert f"ended the worker running it {MAX_RELEASES + 1} times" in (error or "")
    assert campaign_status == "failed"  # the baseline did not pass, and the reason says why
    assert "ended the worker running it" in (reason or "")
