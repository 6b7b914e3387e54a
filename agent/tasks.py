"""Celery tasks of the agent queue: thin adapters over :mod:`agent.service`.

Ids in; each opens its own session, calls the engine through ``agent.service``, commits, THEN
enqueues the next steps. A task that fails for a reason other than our infrastructure ends its
campaign ``failed`` with the reason, instead of leaving it hanging.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from celery.signals import worker_process_init, worker_process_shutdown
from sqlalchemy.orm import Session

from agent import service
from core.db import session_scope
from core.models import Candidate
from core.queues import INFRA_ERRORS, TaskName, app, enqueue, redis_client
from core.settings import get_settings

log = logging.getLogger(__name__)


def _url() -> str:
    return get_settings().effective_database_url


def _run(campaign_of: Callable[[Session], str | None],
         step: Callable[[Session], service.Plan]) -> None:
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
                service.fail(s, campaign_id, f"internal error in the agent: {exc!r}")
        return
    service.send(plan)


def _campaign_of_candidate(candidate_id: str) -> Callable[[Session], str | None]:
    def find(s: Session) -> str | None:
        cand = s.get(Candidate, candidate_id)
        return cand.campaign_id if cand is not None else None
    return find


_stop = threading.Event()


@worker_process_init.connect
def _start_reconciler(**_: Any) -> None:
    if get_settings().worker_role == "agent":
        _stop.clear()
        threading.Thread(target=_reconcile_loop, daemon=True, name="reconcile").start()


@worker_process_shutdown.connect
def _stop_reconciler(**_: Any) -> None:
    _stop.set()


def _reconcile_loop() -> None:
    while not _stop.wait(get_settings().reconcile_s):
        try:
            reconcile()
        except Exception:  # the database or Redis is away: try again next period
            log.warning("reconcile failed", exc_info=True)


def reconcile() -> list[str]:
    """Send ``agent.decide`` to every stalled campaign (one agent process per period, by a
    Redis lock); the ids sent."""
    period = get_settings().reconcile_s
    if not redis_client().set("tuneforge:reconcile", b"1", nx=True,
                              px=max(1, int(period * 900))):
        return []
    with session_scope(_url()) as s:
        ids = service.stalled(s, quiet_s=period)
    for campaign_id in ids:
        enqueue(TaskName.DECIDE, campaign_id)
    return ids


@app.task(name=TaskName.DECIDE, autoretry_for=INFRA_ERRORS, retry_backoff=True, max_retries=8)
def decide(campaign_id: str) -> None:
    """Start the campaign if queued and keep its share of candidates in flight."""
    _run(lambda _s: campaign_id, lambda s: service.decide(s, campaign_id))


@app.task(name=TaskName.COMPILED, autoretry_for=INFRA_ERRORS, retry_backoff=True,
          max_retries=8)
def compiled(candidate_id: str, result: dict[str, Any]) -> None:
    """Record a compile reported by a compile worker, then send the candidate on."""
    _run(_campaign_of_candidate(candidate_id),
         lambda s: service.on_compiled(s, candidate_id, result))


@app.task(name=TaskName.MEASURED, autoretry_for=INFRA_ERRORS, retry_backoff=True,
          max_retries=8)
def measured(candidate_id: str, payload: dict[str, Any]) -> None:
    """Record a measurement reported by a GPU worker, decide, send the next candidates."""
    _run(_campaign_of_candidate(candidate_id),
         lambda s: service.on_measured(s, candidate_id, payload))
