"""The service's side of the campaign driver: its :class:`ServiceFleet` (live GPU workers seen
by their heartbeats), the sending of a :class:`agent.driver.Plan` as Celery tasks, and the
reconciler's queries (stalled campaigns, claims of workers that died).

Fairness. A campaign keeps at most ``min(parallel, live GPUs of its arch)`` candidates in
flight: the driver only tops up to that number, one new candidate per finished one. The GPU
queue is FIFO and every GPU worker takes one message at a time (prefetch 1), so a campaign's
next candidate joins the back of the queue behind the other campaigns' candidates: campaigns
take turns on the GPUs in proportion to their ``parallel`` (equal ``parallel``, equal share),
and no campaign can flood the queue however large its budget.

Idempotence. Every step is sent through :func:`core.queues.enqueue_once`, so a task that is
redelivered after its commit sends what its first run may not have sent, and nothing twice.
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, cast

from sqlalchemy import Table, bindparam, delete, exists, func, select, update
from sqlalchemy.orm import Session

from agent.driver import Plan
from agent.policies import make_policy
from agent.policies.base import Policy, SearchSpace
from agent.spaces import FullSpace, ReplaySpace
from core.arch import gpu_queue
from core.models import (
    Campaign,
    Candidate,
    Event,
    WorkerHeartbeat,
    WorkerNode,
    utcnow,
)
from core.queues import TaskName, enqueue, enqueue_once
from core.settings import Settings, get_settings
from kernels import get_family
from worker.jobs import forget_nodes, replay_dataset, silent_after_s


@lru_cache(maxsize=16)
def policy_for(name: str) -> Policy:
    """The policy called ``name`` (policies are stateless: one per process)."""
    return make_policy(name, get_settings())


@lru_cache(maxsize=32)
def space_for(kernel: str, arch: str, backend: str, shape: str) -> SearchSpace:
    """Every valid point on a GPU; the measured points of the replay (``ValueError`` names the
    shapes a replay has when it has none at ``shape``)."""
    family = get_family(kernel)
    if backend == "replay":
        return ReplaySpace(family, replay_dataset(kernel), shape)
    return FullSpace(family, arch)


_live_gpus: dict[str, tuple[float, list[dict[str, Any]]]] = {}


def live_gpus(session: Session, arch: str, settings: Settings) -> list[dict[str, Any]]:
    """GPU info of the GPU workers of ``arch`` seen within three heartbeats (read at most once
    per heartbeat period: it changes no faster)."""
    now = time.monotonic()
    cached = _live_gpus.get(arch)
    if cached is not None and cached[0] > now:
        return cached[1]
    since = utcnow() - dt.timedelta(seconds=3 * settings.heartbeat_s)
    rows = session.scalars(select(WorkerHeartbeat).where(
        WorkerHeartbeat.role == "gpu", WorkerHeartbeat.last_seen >= since)).all()
    gpus = [dict(r.gpu or {}) for r in rows if (r.gpu or {}).get("queue") == gpu_queue(arch)]
    if gpus:  # an empty fleet is asked again next time (workers may be starting)
        _live_gpus[arch] = (now + settings.heartbeat_s, gpus)
    return gpus


class ServiceFleet:
    """The service's fleet as the driver sees it: the live GPU workers of a campaign's arch
    (from their heartbeats), one policy object per name, the space of each campaign."""

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or get_settings()

    def slots(self, session: Session, campaign: Campaign) -> int:
        """One candidate a live GPU of the campaign's arch (at least one: workers may be
        starting)."""
        return max(1, len(live_gpus(session, campaign.arch, self.settings)))

    def policy(self, campaign: Campaign) -> Policy:
        """The process's policy of the campaign's name."""
        return policy_for(campaign.policy)

    def space(self, campaign: Campaign) -> SearchSpace:
        """Every valid point on a GPU; the measured points of the replay."""
        return space_for(campaign.kernel, campaign.arch, campaign.backend, campaign.shape_text)

    def prepare(self, session: Session, campaign: Campaign) -> str | None:
        """Fill the campaign's device (and vendor time) before it starts; the reason it
        cannot run, if it cannot (e.g. a replay fleet has no measurement at its shape)."""
        shape = campaign.problem
        try:
            space_for(campaign.kernel, campaign.arch, campaign.backend, str(shape))
        except ValueError as exc:
            return f"{campaign.backend} backend: {exc}"
        if campaign.backend == "replay":
            dataset = replay_dataset(campaign.kernel)
            device = dict(dataset.meta.get("device") or {})
            device.setdefault("name", dataset.meta.get("gpu", "unknown GPU"))
            vendor = (dataset.meta.get("vendor_us") or {}).get(str(shape))
            campaign.vendor_us = float(vendor) if vendor is not None else None
        else:
            gpus = live_gpus(session, campaign.arch, self.settings)
            device = gpus[0] if gpus else {}
        if device:
            campaign.device = device
            campaign.gpu_name = device.get("name")
        return None


def stalled(session: Session, *, quiet_s: float) -> list[str]:
    """Campaigns that may have lost their next step: queued ones, and running ones with no
    event for ``quiet_s`` (an enqueue that failed after its commit, a broker that lost its
    messages). A ``decide`` for each is harmless: it only tops up and re-plans."""
    since = utcnow() - dt.timedelta(seconds=quiet_s)
    last_event = (select(Event.campaign_id, func.max(Event.created_at).label("at"))
                  .group_by(Event.campaign_id).subquery())
    rows = session.execute(
        select(Campaign.id).outerjoin(last_event, last_event.c.campaign_id == Campaign.id)
        .where(Campaign.status.in_(("queued", "running")),
               (last_event.c.at.is_(None)) | (last_event.c.at < since))
    ).all()
    return [cid for (cid,) in rows]


@dataclass(frozen=True)
class Claim:
    """A candidate that a worker took for one of its steps."""

    candidate_id: str
    #: ``compiling``, ``measuring``, or ``ok`` (a correct kernel under the sanitizer gate)
    status: str
    node: str
    arch: str


#: Claims of nodes that have not heartbeaten since ``since`` (the partial index on
#: ``claimed_by`` keeps this to the candidates held right now).
_ABANDONED = (
    select(Candidate.id, Candidate.status, Candidate.claimed_by, Campaign.arch)
    .join(Campaign, Campaign.id == Candidate.campaign_id)
    .where(Candidate.claimed_by.is_not(None),
           ~exists().where(WorkerNode.node == Candidate.claimed_by,
                           WorkerNode.last_seen >= bindparam("since"))))
_CANDIDATE_TABLE = cast(Table, Candidate.__table__)
_CANDIDATES = _CANDIDATE_TABLE.c
_RELEASE = (update(_CANDIDATE_TABLE)
            .where(_CANDIDATES.id == bindparam("candidate_id"),
                   _CANDIDATES.status == bindparam("from_status"),
                   _CANDIDATES.claimed_by == bindparam("node"))
            .values(claimed_by=None))


def abandoned(session: Session, settings: Settings | None = None) -> list[Claim]:
    """Candidates held by a Celery worker whose main process stopped heartbeating (killed
    outright, out of memory, its machine lost): their messages wait in Redis's ``unacked``
    hash for the visibility timeout (an hour), so nothing else would take them before."""
    settings = settings or get_settings()
    since = utcnow() - dt.timedelta(seconds=silent_after_s(settings))
    forget_nodes(session)
    return [Claim(cid, status, node or "", arch)
            for cid, status, node, arch in session.execute(_ABANDONED, {"since": since})]


def silent_nodes(session: Session, role: str, settings: Settings | None = None
                 ) -> list[tuple[str, dt.datetime]]:
    """Celery workers of ``role`` whose main process stopped heartbeating: (node, last beat)."""
    settings = settings or get_settings()
    since = utcnow() - dt.timedelta(seconds=silent_after_s(settings))
    return [(node, last_seen) for node, last_seen in session.execute(
        select(WorkerNode.node, WorkerNode.last_seen).where(
            WorkerNode.role == role, WorkerNode.last_seen < since))]


def forget_node(session: Session, node: str) -> None:
    """Drop a node's row (what it held was given back)."""
    session.execute(delete(WorkerNode).where(WorkerNode.node == node))


def release(session: Session, claim: Claim) -> bool:
    """Give a claim back (nobody holds the candidate; its step may be sent again): False when
    the candidate moved on meanwhile (recorded, or taken by another delivery)."""
    done = session.execute(_RELEASE, {"candidate_id": claim.candidate_id,
                                      "from_status": claim.status, "node": claim.node})
    return bool(getattr(done, "rowcount", 0))


def awaiting_gate(session: Session, *, quiet_s: float) -> dict[str, str]:
    """Best kernels of campaigns done for ``quiet_s`` that asked for the sanitizer gate, have
    no record yet and no worker holding them: candidate id -> GPU queue (their
    ``worker.sanitize`` may have been lost with the broker's messages)."""
    since = utcnow() - dt.timedelta(seconds=quiet_s)
    rows = session.execute(
        select(Candidate.id, Campaign.arch)
        .join(Campaign, Campaign.best_id == Candidate.id)
        .where(Campaign.status == "done", Campaign.sanitize.is_(True),
               Campaign.backend == "gpu", Campaign.finished_at < since,
               Candidate.status == "ok", Candidate.sanitizer.is_(None),
               Candidate.claimed_by.is_(None)))
    return {cid: gpu_queue(arch) for cid, arch in rows}


def send(plan: Plan) -> None:
    """Enqueue the plan's steps, each at most once (call after the commit)."""
    for cid in plan.compile:
        enqueue_once(TaskName.COMPILE, cid, cid)
    for cid, queue in plan.evaluate:
        enqueue_once(TaskName.EVALUATE, cid, cid, queue=queue)
    for cid, queue in plan.sanitize:
        enqueue_once(TaskName.SANITIZE, cid, cid, queue=queue)
    for campaign_id in plan.decide:  # a shape set's next member (deciding twice is harmless)
        enqueue(TaskName.DECIDE, campaign_id)
