"""Celery tasks of the agent queue: thin adapters over the campaign driver (:mod:`agent.driver`).

Ids in; each opens its own session, calls the driver with the service's fleet
(:class:`agent.service.ServiceFleet`), commits, THEN enqueues the plan's steps. A task that
fails for a reason other than our infrastructure ends its
campaign ``failed`` with the reason, instead of leaving it hanging.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from celery.signals import worker_process_init, worker_process_shutdown
from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from agent import driver, service
from core import feed
from core.db import session_scope
from core.evaluation import CompileResult
from core.models import Campaign, Candidate, utcnow
from core.queues import (
    INFRA_ERRORS,
    MAX_EVALUATION_ATTEMPTS,
    ONCE_TTL_S,
    CeleryQueue,
    TaskName,
    app,
    drop_report,
    enqueue,
    enqueue_once,
    forget_sent,
    gpu_queue,
    kept_reports,
    mentioned_in_messages,
    publish_events,
    redis_client,
    restore_unacked,
)
from core.settings import get_settings
from worker import tasks as worker_tasks
from worker.jobs import (
    compile_result_from_dict,
    compile_result_to_dict,
    measurement_from_payload,
)

log = logging.getLogger(__name__)


def _url() -> str:
    return get_settings().effective_database_url


def _run(campaign_of: Callable[[Session], str | None],
         step: Callable[[Session], driver.Plan]) -> None:
    started = time.monotonic()
    try:
        with session_scope(_url()) as s:
            plan = step(s)
    except INFRA_ERRORS:
        raise  # retried by Celery
    except (Exception, SoftTimeLimitExceeded) as exc:
        log.exception("agent step failed")
        with session_scope(_url()) as s:
            campaign_id = campaign_of(s)
            if campaign_id is not None:
                driver.fail(s, campaign_id, f"internal error in the agent: {exc!r}")
        return
    service.send(plan)
    # an agent's heartbeat carries the steps it took and the seconds they took (its
    # utilization: busy / wall time)
    worker_tasks.runtime().count_evaluation(time.monotonic() - started)


def _campaign_of_candidate(candidate_id: str) -> Callable[[Session], str | None]:
    def find(s: Session) -> str | None:
        cand = s.get(Candidate, candidate_id)
        return cand.campaign_id if cand is not None else None
    return find


_stop = threading.Event()


def fleet() -> service.ServiceFleet:
    """The service's fleet, as this process's settings describe it."""
    return service.ServiceFleet(get_settings())


@worker_process_init.connect
def _publish_events(**_: Any) -> None:
    """The events this worker process writes reach the API's event streams through Redis."""
    feed.set_publisher(publish_events)


@worker_process_init.connect
def _start_reconciler(**_: Any) -> None:
    if get_settings().worker_role == "agent":
        _stop.clear()
        threading.Thread(target=_reconcile_loop, daemon=True, name="reconcile").start()


@worker_process_shutdown.connect
def _stop_reconciler(**_: Any) -> None:
    _stop.set()


def _reconcile_loop() -> None:
    settings = get_settings()
    # claims of dead workers are looked for every half heartbeat period (a worker is gone
    # after three silent periods), lost messages every LOST_CHECK_BEATS periods from the first
    # tick (an agent started in place of a killed one serves the reports lost with it at once),
    # stalled campaigns every reconcile period
    tick = min(settings.heartbeat_s / 2, settings.reconcile_s)
    next_reconcile = time.monotonic() + settings.reconcile_s
    next_lost = time.monotonic()
    while not _stop.wait(tick):
        try:
            release_abandoned()
        except Exception:  # the database or Redis is away: try again next period
            log.warning("looking for abandoned claims failed", exc_info=True)
        if time.monotonic() >= next_lost:
            next_lost = time.monotonic() + lost_check_s(settings.heartbeat_s)
            try:
                resend_lost()
            except Exception:
                log.warning("looking for lost messages failed", exc_info=True)
        if time.monotonic() < next_reconcile:
            continue
        next_reconcile = time.monotonic() + settings.reconcile_s
        try:
            reconcile()
        except Exception:
            log.warning("reconcile failed", exc_info=True)


def reconcile() -> list[str]:
    """Send ``agent.decide`` to every stalled campaign, and the lost step of every candidate
    stranded mid-flight or waiting for its sanitizer gate (one agent process per period, by a
    Redis lock); the campaign ids."""
    period = get_settings().reconcile_s
    if not redis_client().set("tuneforge:reconcile", b"1", nx=True,
                              px=max(1, int(period * 900))):
        return []
    with session_scope(_url()) as s:
        ids = service.stalled(s, quiet_s=period)
        working = _working(s, ids)
        working.update({cid: ("ok", queue)
                        for cid, queue in service.awaiting_gate(s, quiet_s=period).items()})
    for campaign_id in ids:
        enqueue(TaskName.DECIDE, campaign_id)
    resend_stranded(working)
    return ids


#: The step that an in-flight candidate waits for: taken by a worker (``compiling``,
#: ``measuring``; a correct kernel, ``ok``, held by the sanitizer gate) or sent and not taken yet
#: (``pending``, ``compiled``: a message that a worker killed outright had taken off the queue
#: and not yet claimed is in no queue and in no ``unacked`` hash, and decide's re-plan sends
#: nothing while the step's enqueue guard stands, a day).
_STEP = {"pending": TaskName.COMPILE, "compiling": TaskName.COMPILE,
         "compiled": TaskName.EVALUATE, "measuring": TaskName.EVALUATE,
         "ok": TaskName.SANITIZE}
#: The step of a candidate that a worker claimed (a claim on another status is stale).
_CLAIMED_STEP = {status: _STEP[status] for status in ("compiling", "measuring", "ok")}


def _working(session: Session, campaign_ids: list[str]) -> dict[str, tuple[str, str]]:
    """Candidates of ``campaign_ids`` in flight: id -> (status, queue of their step)."""
    if not campaign_ids:
        return {}
    rows = session.execute(
        select(Candidate.id, Candidate.status, Campaign.arch)
        .join(Campaign, Campaign.id == Candidate.campaign_id)
        .where(Candidate.campaign_id.in_(campaign_ids),
               Candidate.status.in_(("pending", "compiling", "compiled", "measuring"))))
    return {cid: (status, _queue(status, arch)) for cid, status, arch in rows}


#: In-flight candidates of campaigns not finished a day ago (those that still run, and those
#: whose stragglers a cancel left in flight). Each is carried by a message of the broker: in a
#: queue, or delivered and not acknowledged while a worker runs its step (``acks_late``), also
#: when it is claimed.
_IN_FLIGHT = (
    select(Candidate.id, Candidate.status, Campaign.arch)
    .join(Campaign, Campaign.id == Candidate.campaign_id)
    .where(Campaign.finished_at.is_(None) | (Campaign.finished_at > bindparam("since")),
           Candidate.status.in_(("pending", "compiling", "compiled", "measuring"))))

#: The look for lost messages runs every this many heartbeat periods; a candidate missing from
#: the broker on two looks in a row has its step sent again.
LOST_CHECK_BEATS = 2
_SUSPECTS = "tuneforge:lost-suspects"


def lost_check_s(heartbeat_s: float) -> float:
    """Seconds between two looks for lost messages (:func:`resend_lost`)."""
    return LOST_CHECK_BEATS * heartbeat_s


def resend_lost() -> list[str]:
    """Send again the step of every in-flight candidate that no message of the broker names
    on two looks in a row: a compile worker killed between its record of a compile and its
    enqueue of the evaluation, an agent killed between its commit and its enqueue, a task
    whose report or retry met the broker away (Celery then drops it: ``Reject``, the
    candidate still claimed by its live worker), a broker restart. Whatever its campaign is
    doing, within two periods (the stalled-campaign look waited for a campaign quiet for
    ``TUNEFORGE_RECONCILE_S``, so a campaign still going on its other slots ran short of one
    meanwhile). A step still running whose message a broker restart wiped is sent a second
    time, which a step allows (its result is recorded once; an evaluation counts one more
    delivery). One agent process per period, by a Redis lock; the candidate ids sent."""
    settings = get_settings()
    period = lost_check_s(settings.heartbeat_s)
    client = redis_client()
    if not client.set("tuneforge:resend-lost", b"1", nx=True, px=max(1, int(period * 900))):
        return []
    since = utcnow() - dt.timedelta(days=1)
    with session_scope(_url()) as s:
        waiting = {cid: (status, _queue(status, arch)) for cid, status, arch in
                   s.execute(_IN_FLIGHT, {"since": since})}
    missing = set(waiting) - mentioned_in_messages(set(waiting))
    before = {k.decode(): v.decode() for k, v in client.hgetall(_SUSPECTS).items()}
    confirmed = {cid: waiting[cid] for cid in missing if before.get(cid) == waiting[cid][0]}
    # a measured candidate whose report is gone is served its kept report on the first look
    # (sent twice, it is recorded once: no GPU measures it again)
    confirmed.update({cid: waiting[cid] for cid in kept_reports(sorted(
        cid for cid in missing if waiting[cid][0] == "measuring"))})
    suspects = {cid: waiting[cid][0] for cid in missing - set(confirmed)}
    pipe = client.pipeline()
    pipe.delete(_SUSPECTS)
    if suspects:
        pipe.hset(_SUSPECTS, mapping=suspects)
        pipe.expire(_SUSPECTS, max(1, int(4 * period)))
    pipe.execute()
    return resend_stranded(confirmed)


def _queue(status: str, arch: str) -> str:
    return "compile" if status in ("pending", "compiling") else gpu_queue(arch)


#: A step sent again is not sent again for this long (whichever look found it missing first).
RESEND_HOLD_S = 10


def resend_stranded(working: dict[str, tuple[str, str]], recheck_s: float = 0.5) -> list[str]:
    """Send again the step of every in-flight candidate (or one that waits for its sanitizer
    gate) that no message of the broker names any more (the broker restarted and lost the
    running task's message, or the report the task sent; a worker killed outright right after
    it took the message off the queue): without this, a Redis restart or a killed GPU worker
    strands a campaign. Checked twice ``recheck_s`` apart (a message is briefly in
    neither place while a worker takes it); one look sends it, the others find it sent for
    :data:`RESEND_HOLD_S` (a step sent twice is measured twice, recorded once). The ids
    sent."""
    if not working:
        return []
    missing = set(working) - mentioned_in_messages(set(working))
    if missing:
        _stop.wait(recheck_s)
        missing -= mentioned_in_messages(missing)
    with session_scope(_url()) as s:  # still where it was (not finished meanwhile)
        still = {cid for cid, status, unchecked in s.execute(
            select(Candidate.id, Candidate.status, Candidate.sanitizer.is_(None))
            .where(Candidate.id.in_(missing)))
            if status == working[cid][0] and (status != "ok" or unchecked)} \
            if missing else set()
    sent = []
    kept = kept_reports(sorted(cid for cid in still if working[cid][0] == "measuring"))
    for cid in sorted(still):
        status, queue = working[cid]
        if cid in kept:  # measured: its report was lost (with an agent), not its measurement
            if redis_client().set(f"tuneforge:resent:{TaskName.MEASURED}:{cid}", b"1",
                                  nx=True, ex=RESEND_HOLD_S):
                log.warning("candidate %s was measured but its report is gone: sending the "
                            "kept report again", cid)
                enqueue(TaskName.MEASURED, cid, kept[cid])
                sent.append(cid)
            continue
        # the quiet-campaign look and the lost-message look (in any agent process) may both
        # find it missing before either sent it: one of them sends it
        if not redis_client().set(f"tuneforge:resent:{_STEP[status]}:{cid}", b"1", nx=True,
                                  ex=RESEND_HOLD_S):
            continue
        log.warning("candidate %s was %s but its message is gone: sending it again",
                    cid, "waiting for its sanitizer gate" if status == "ok" else status)
        forget_sent(_STEP[status], cid)
        enqueue_once(_STEP[status], cid, cid, queue=queue)
        sent.append(cid)
    return sent


#: How many times the claim of one step of a candidate is given back (its worker died
#: outright while holding it) before the step counts as the candidate's fault. An evaluation's
#: deliveries are counted by the GPU workers themselves (``Candidate.attempts``): its cap is
#: :data:`MAX_EVALUATION_ATTEMPTS` whichever way its worker died.
MAX_RELEASES = MAX_EVALUATION_ATTEMPTS


def release_abandoned() -> list[str]:
    """Give back the candidates held by workers that stopped heartbeating and send their step
    again (one agent process per period, by a Redis lock); the candidate ids.

    A Celery worker killed outright (its main process too: SIGKILL, out of memory, its machine
    lost) holds its message in Redis's ``unacked`` hash until the visibility timeout, an hour;
    a pool process that dies alone is Celery's to redeliver, and its node goes on beating. The
    original message, when Redis hands it out again an hour later, finds the step done and
    does nothing (every take is conditional, every record idempotent)."""
    settings = get_settings()
    if not redis_client().set("tuneforge:release-abandoned", b"1", nx=True,
                              px=max(1, int(settings.heartbeat_s * 450))):
        return []
    with session_scope(_url()) as s:
        claims = service.abandoned(s, settings)
        dead_agents = service.silent_nodes(s, "agent", settings)
        dead_workers = [(node, role, last_seen) for role in ("compile", "gpu")
                        for node, last_seen in service.silent_nodes(s, role, settings)]
    for node, last_seen in dead_agents:
        restore_held_by(node, last_seen.timestamp() + 2 * settings.heartbeat_s)
    for node, role, last_seen in dead_workers:
        restore_untaken(node, role, last_seen.timestamp() + 2 * settings.heartbeat_s)
    sent: list[str] = []
    for claim in claims:
        with session_scope(_url()) as s:
            if not service.release(s, claim):
                continue  # recorded or taken again meanwhile
        step = _CLAIMED_STEP.get(claim.status)
        if step is None:
            continue  # nothing waits for a step (a stale claim, now cleared)
        releases = int(redis_client().incr(f"tuneforge:released:{step}:{claim.candidate_id}"))
        redis_client().expire(f"tuneforge:released:{step}:{claim.candidate_id}", ONCE_TTL_S)
        if step != TaskName.EVALUATE and releases > MAX_RELEASES:
            log.error("candidate %s: its %s ended %d workers; recorded as failed",
                      claim.candidate_id, step, releases)
            _report_abandoned(step, claim.candidate_id, releases)
            continue
        log.warning("candidate %s was %s by %s, which stopped heartbeating: sending it again",
                    claim.candidate_id, "under the sanitizer gate" if claim.status == "ok"
                    else claim.status, claim.node)
        forget_sent(step, claim.candidate_id)
        enqueue_once(step, claim.candidate_id, claim.candidate_id,
                     queue=_queue(claim.status, claim.arch))
        sent.append(claim.candidate_id)
    return sent


def restore_held_by(node: str, died_before: float) -> list[str]:
    """Hand out again what an agent process killed outright held (it claims no candidate: its
    messages, an ``agent.measured`` carrying a measurement, are its state). Which of the
    ``unacked`` messages of the agent queue were its is not recorded, so every one taken
    before it can have died is handed out again; a live agent process's is then run twice,
    which the agent's steps allow (each reads and locks what it records, and records a
    finished candidate no second time). Then the node is forgotten: once per dead node."""
    names = restore_unacked(CeleryQueue.AGENT, died_before)
    if names:
        log.warning("agent %s stopped heartbeating: %d of its messages handed out again (%s)",
                    node, len(names), ", ".join(sorted(set(names))))
    with session_scope(_url()) as s:
        service.forget_node(s, node)
    return names


#: The status of a candidate whose step a message carries and no worker has taken yet.
_UNTAKEN = {TaskName.COMPILE: "pending", TaskName.EVALUATE: "compiled"}


def restore_untaken(node: str, role: str, died_before: float) -> list[str]:
    """Hand out again what a compile or GPU worker killed outright had taken off its queue and
    not claimed yet (its pool process had not started the task): the message waits in
    Redis's ``unacked`` hash for the visibility timeout (an hour), and no claim says whose it
    is, so every message of the role's queues taken before the node can have died whose
    candidate still waits for that step, unclaimed, is handed out again (a live worker's
    message taken that long ago is claimed already). What it had claimed,
    :func:`release_abandoned` gives back. Then the node is forgotten: once per dead node."""
    messages: dict[str, str] = {}  # candidate id -> task name, of the messages looked at

    def in_queue(name: str) -> bool:
        return name == CeleryQueue.COMPILE if role == "compile" \
            else name.startswith(f"{CeleryQueue.GPU}.")

    def note(task: str, args: list[Any]) -> bool:
        if task in _UNTAKEN and args and isinstance(args[0], str):
            messages[args[0]] = task
        return False

    restore_unacked(in_queue, died_before, note)  # a look first: which candidates they name
    waiting: set[str] = set()
    if messages:
        with session_scope(_url()) as s:
            waiting = {cid for cid, status, claimed in s.execute(
                select(Candidate.id, Candidate.status, Candidate.claimed_by)
                .where(Candidate.id.in_(messages)))
                if claimed is None and status == _UNTAKEN[TaskName(messages[cid])]}
    names = restore_unacked(in_queue, died_before,
                            lambda task, args: bool(args) and args[0] in waiting
                            and task == messages.get(args[0])) if waiting else []
    if names:
        log.warning("%s stopped heartbeating: %d message(s) it had taken and not started "
                    "handed out again (%s)", node, len(names), ", ".join(sorted(set(names))))
    with session_scope(_url()) as s:
        service.forget_node(s, node)
    return names


def _report_abandoned(step: TaskName, candidate_id: str, releases: int) -> None:
    """Record a compile or a sanitizer gate whose workers kept dying as the step's failure."""
    why = (f"its {step} ended the worker running it {releases} times (the worker stopped "
           "heartbeating: killed outright, out of memory or its machine lost); not sent again")
    if step == TaskName.COMPILE:
        enqueue(TaskName.COMPILED, candidate_id,
                compile_result_to_dict(CompileResult("error", 0.0, error=why)))
    else:
        from worker.sanitize import error_record

        enqueue(TaskName.SANITIZED, candidate_id, error_record(why))


@app.task(name=TaskName.DECIDE, autoretry_for=INFRA_ERRORS, retry_backoff=True, max_retries=8)
def decide(campaign_id: str) -> None:
    """Start the campaign if queued and keep its share of candidates in flight."""
    _run(lambda _s: campaign_id, lambda s: driver.decide(s, campaign_id, fleet()))


@app.task(name=TaskName.COMPILED, autoretry_for=INFRA_ERRORS, retry_backoff=True,
          max_retries=8)
def compiled(candidate_id: str, result: dict[str, Any]) -> None:
    """Record a failed compile reported by a compile worker (the candidate's outcome), then
    decide (a compile worker records a successful compile itself)."""
    _run(_campaign_of_candidate(candidate_id),
         lambda s: driver.on_compiled(s, candidate_id, compile_result_from_dict(result),
                                      fleet()))


@app.task(name=TaskName.MEASURED, autoretry_for=INFRA_ERRORS, retry_backoff=True,
          max_retries=8)
def measured(candidate_id: str, payload: dict[str, Any]) -> None:
    """Record a measurement reported by a GPU worker, decide, send the next candidates; then
    the GPU worker's kept copy of it is let go."""
    _run(_campaign_of_candidate(candidate_id),
         lambda s: driver.on_measured(s, candidate_id, measurement_from_payload(payload),
                                      fleet()))
    drop_report(candidate_id)


@app.task(name=TaskName.SANITIZED, autoretry_for=INFRA_ERRORS, retry_backoff=True,
          max_retries=8)
def sanitized(candidate_id: str, record: dict[str, Any]) -> None:
    """Store the compute-sanitizer gate's record that a GPU worker reported."""
    _run(_campaign_of_candidate(candidate_id),
         lambda s: driver.on_sanitized(s, candidate_id, record))
