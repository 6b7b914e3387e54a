"""Team history, live workers, health and Prometheus metrics."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any

from fastapi import APIRouter, Query, Response, status
from fastapi.exceptions import RequestValidationError
from fastapi.responses import PlainTextResponse
from sqlalchemy import func, select, text
from sqlalchemy.orm import load_only

from agent.campaigns import PRINTABLE
from api.deps import OperatorDep, SessionDep, SettingsDep, TeamDep
from api.events import SENT
from api.json_body import StrictJsonRoute
from api.schemas import (
    ERROR_DESCRIPTIONS,
    HistoryEntry,
    WorkerRead,
    error_responses,
)
from core import families
from core.models import Campaign, Candidate, WorkerHeartbeat, utcnow
from core.queues import queue_lengths, redis_client

router = APIRouter(tags=["system"], route_class=StrictJsonRoute)


Name = Annotated[str | None, Query(max_length=200, pattern=PRINTABLE)]
ShapeText = Annotated[str | None, Query(max_length=200, pattern=PRINTABLE, description=(
    "the family's shape text, e.g. 4096x4096x4096 or rows=8192,cols=32768 (needs kernel)"))]


@router.get("/history", response_model=list[HistoryEntry], responses=error_responses(401))
def history(session: SessionDep, team: TeamDep, kernel: Name = None, shape: ShapeText = None,
            gpu: Name = None) -> list[HistoryEntry]:
    """The team's best result per kernel, shape and GPU, across all its campaigns; of campaigns
    whose best times tie, the one that finished first is credited (then the one created first).
    ``kernel`` a team family's name alone: every version of it (each version is its own kernel,
    its entries apart); ``NAME@vN`` or its key: that version."""
    wanted = None
    family = None
    if kernel is not None:
        try:
            family = families.resolve(session, team_id=team.team_id, name=kernel)
        except families.FamilyError as exc:
            raise RequestValidationError([{"loc": ["query", "kernel"], "type": "value_error",
                                           "msg": str(exc)}]) from None
    if shape is not None:
        if family is None:
            raise RequestValidationError([{"loc": ["query", "shape"], "type": "value_error",
                                           "msg": "shape needs kernel (its family parses it)"}])
        try:
            wanted = family.parse_dims(shape)
        except ValueError as exc:
            raise RequestValidationError([{"loc": ["query", "shape"], "type": "value_error",
                                           "msg": str(exc)}]) from None
    # the columns read below alone: a row's other JSON columns (the candidate's feedback
    # records, the campaign's device and settings) were most of a long history's cost
    query = (select(Campaign, Candidate).join(Candidate, Candidate.id == Campaign.best_id)
             .options(load_only(Campaign.id, Campaign.kernel, Campaign.dims, Campaign.gpu_name,
                                Campaign.backend, Campaign.finished_at),
                      load_only(Candidate.id, Candidate.avg_us, Candidate.params))
             .where(Campaign.team_id == team.team_id, Candidate.avg_us.is_not(None))
             .order_by(Campaign.finished_at.is_(None), Campaign.finished_at,
                       Campaign.created_at, Campaign.id))
    if family is not None and kernel is not None:
        # a team family named without a version: every version of it, each its own entries (a
        # built-in's name, NAME@vN or a key names no stored family: just the resolved one)
        stored = families.versions(session, team_id=team.team_id, name=kernel)
        keys = [row.key for row in stored] or [family.name]
        query = query.where(Campaign.kernel.in_(keys))
    if gpu is not None:
        query = query.where(Campaign.gpu_name == gpu)
    named: dict[str, tuple[str, int | None]] = {}

    def family_version(key: str) -> tuple[str, int | None]:
        """(family name, version) of a campaign's kernel key (a built-in: its name, None)."""
        if key not in named:
            row = families.version_of(session, team_id=team.team_id, key=key)
            named[key] = (row.name, row.version) if row is not None else (key, None)
        return named[key]

    best: dict[tuple[object, ...], HistoryEntry] = {}
    for campaign, cand in session.execute(query).all():
        if wanted is not None and campaign.dims != wanted.as_dict():
            continue
        key = (campaign.kernel, campaign.shape_text, campaign.gpu_name, campaign.backend)
        assert cand.avg_us is not None
        seen = best.get(key)
        count = (seen.campaigns if seen else 0) + 1
        if seen is None or cand.avg_us < seen.avg_us:
            best[key] = HistoryEntry(
                kernel=campaign.kernel, shape=dict(campaign.dims),
                shape_text=campaign.shape_text, gpu=campaign.gpu_name,
                backend=campaign.backend, avg_us=cand.avg_us,
                throughput=round(campaign.throughput(cand.avg_us) or 0.0, 4),
                unit=campaign.metric.unit,
                params=cand.params, campaign_id=campaign.id, candidate_id=cand.id,
                campaigns=count, finished_at=campaign.finished_at,
                family=family_version(campaign.kernel)[0],
                family_version=family_version(campaign.kernel)[1])
        else:
            seen.campaigns = count
    return sorted(best.values(), key=lambda e: (e.kernel, tuple(e.shape.values()),
                                                e.gpu or ""))


@router.get("/workers", response_model=list[WorkerRead], responses=error_responses(401, 403))
def workers(_operator: OperatorDep, session: SessionDep, settings: SettingsDep
            ) -> list[WorkerRead]:
    """Worker processes seen within three heartbeats: the whole fleet, for the operator's token
    only (a team's key is a 403)."""
    since = utcnow() - dt.timedelta(seconds=3 * settings.heartbeat_s)
    rows = session.scalars(select(WorkerHeartbeat).where(WorkerHeartbeat.last_seen >= since)
                           .order_by(WorkerHeartbeat.role, WorkerHeartbeat.name)).all()
    return [WorkerRead(name=r.name, role=r.role, host=r.host, backend=r.backend, gpu=r.gpu,
                       last_seen=r.last_seen, evaluations=r.evaluations,
                       busy_seconds=r.busy_seconds) for r in rows]


@router.get("/healthz", responses={503: {"model": dict[str, str], "description":
                                         "The database or the broker cannot be reached"}})
def healthz(session: SessionDep, response: Response) -> dict[str, str]:
    """Database and broker reachable (503 otherwise)."""
    result = {"status": "ok", "database": "ok", "redis": "ok"}
    try:
        session.execute(text("SELECT 1"))
    except Exception as exc:
        result["database"] = f"error: {type(exc).__name__}"
    try:
        redis_client().ping()
    except Exception as exc:
        result["redis"] = f"error: {type(exc).__name__}"
    if result["database"] != "ok" or result["redis"] != "ok":
        result["status"] = "error"
        response.status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    return result


#: The metrics' refusals are JSON (``error_responses`` would document them as the route's text)
_JSON_REFUSALS: dict[int | str, dict[str, Any]] = {
    code: {"description": ERROR_DESCRIPTIONS[code], "content": {"application/json": {
        "schema": {"$ref": "#/components/schemas/ErrorRead"}}}} for code in (401, 403)}


@router.get("/metrics", response_class=PlainTextResponse, responses=_JSON_REFUSALS)
def metrics(_operator: OperatorDep, session: SessionDep, settings: SettingsDep) -> Response:
    """Prometheus text: campaigns by status, candidates evaluated, queue lengths, workers (every
    team's: for the operator's token only, which Prometheus sends as a bearer token)."""
    lines = ["# HELP tuneforge_campaigns Campaigns by status.",
             "# TYPE tuneforge_campaigns gauge"]
    by_status = dict(session.execute(select(Campaign.status, func.count())
                                     .group_by(Campaign.status)).all())
    for name in ("queued", "running", "done", "failed", "cancelled"):
        lines.append(f'tuneforge_campaigns{{status="{name}"}} {by_status.get(name, 0)}')
    evaluated = session.scalar(select(func.coalesce(func.sum(Campaign.evaluations), 0))) or 0
    lines += ["# HELP tuneforge_candidates_evaluated_total Candidates with a final result.",
              "# TYPE tuneforge_candidates_evaluated_total counter",
              f"tuneforge_candidates_evaluated_total {evaluated}"]
    since = utcnow() - dt.timedelta(seconds=3 * settings.heartbeat_s)
    live = dict(session.execute(select(WorkerHeartbeat.role, func.count())
                                .where(WorkerHeartbeat.last_seen >= since)
                                .group_by(WorkerHeartbeat.role)).all())
    lines += ["# HELP tuneforge_workers Live worker processes by role.",
              "# TYPE tuneforge_workers gauge"]
    lines += [f'tuneforge_workers{{role="{role}"}} {live.get(role, 0)}'
              for role in ("agent", "compile", "gpu")]
    try:
        lengths = queue_lengths((settings.arch,))
    except Exception:
        lengths = {}
    if lengths:
        lines += ["# HELP tuneforge_queue_length Messages waiting in each Celery queue.",
                  "# TYPE tuneforge_queue_length gauge"]
        lines += [f'tuneforge_queue_length{{queue="{q}"}} {n}' for q, n in lengths.items()]
    lines += ["# HELP tuneforge_sse_events_sent_total Events sent by this API process's event "
              "streams, by where they came from (push: Redis; database: caught up, a gap "
              "filled, or read without Redis).",
              "# TYPE tuneforge_sse_events_sent_total counter"]
    lines += [f'tuneforge_sse_events_sent_total{{source="{source}"}} {SENT[source]}'
              for source in ("push", "database")]
    lines += ["# HELP tuneforge_sse_streams Event streams open in this API process.",
              "# TYPE tuneforge_sse_streams gauge",
              f"tuneforge_sse_streams {SENT['streams'] - SENT['streams_closed']}"]
    return Response("\n".join(lines) + "\n",
                    media_type="text/plain; version=0.0.4; charset=utf-8")
