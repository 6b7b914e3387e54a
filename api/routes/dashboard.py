"""What the dashboard and ``tuneforge report``/``export`` need beyond the REST resources: every
candidate of a campaign as one compact point (status, time, decision and its reason, elapsed
seconds, parameters), the campaign's notes, with the vendor's and the peak's lines of the plot,
in the family's unit."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel
from sqlalchemy import select
from sqlalchemy.orm import Session

from agent.exports import STATUS_COLOURS, aware, campaign_ceiling, campaign_points
from api.deps import CampaignDep, OffsetQuery, SessionDep
from api.json_body import StrictJsonRoute
from api.schemas import error_responses
from core.models import Campaign, Event
from core.statuses import CandidateStatus, FinalStatus
from kernels import get_family

router = APIRouter(prefix="/campaigns", tags=["dashboard"], route_class=StrictJsonRoute)


class DecisionRead(BaseModel):
    """What the agent made of a candidate."""

    accepted: bool | None
    improvement_pct: float | None
    reason: str | None
    #: the incumbent it was compared with (a correct candidate after the first), its iteration
    incumbent_id: str | None = None
    incumbent_iteration: int | None = None


class PointRead(BaseModel):
    """One candidate as a point of the convergence plot and a link of the decision chain."""

    id: str
    iteration: int
    status: CandidateStatus
    action: str | None
    proposed_by: str | None
    reason: str | None
    parent_id: str | None
    accepted: bool
    avg_us: float | None
    #: in the page's ``unit``
    throughput: float | None
    runs_us: list[float] | None
    decision: DecisionRead | None
    compile_s: float | None
    gpu_seconds: float
    created_at: dt.datetime | None
    finished_at: dt.datetime | None
    elapsed_s: float | None
    params: dict[str, Any]
    #: the recorded error's first 300 characters (the candidate's record has all of it)
    error: str | None
    #: a failed candidate's one-line reason (``core.statuses.failure_line``); None otherwise
    failure: str | None = None


class NoteRead(BaseModel):
    """Something the agent said about the campaign that no candidate shows (an injected action
    it dropped, say), after candidate ``after_iteration`` (``None``: before the first)."""

    kind: str | None
    message: str
    action: str | None
    after_iteration: int | None
    created_at: dt.datetime | None


class PointPage(BaseModel):
    """A page of points by iteration, the campaign's notes, and the plot's reference lines."""

    campaign_id: str
    status: str
    #: the family's metric: ``TFLOP/s`` or ``GB/s``; the ceiling of the best kernel (its
    #: precision scheme's: ``bf16x3 ceiling``, ``FP32 FMA peak``) and what it is
    unit: str
    peak_label: str
    vendor: str | None
    vendor_us: float | None
    vendor_throughput: float | None
    peak: float | None
    started_at: dt.datetime | None
    #: the colour of every final status, in the vocabulary's order (the plot's legend order)
    status_colours: dict[FinalStatus, str]
    items: list[PointRead]
    notes: list[NoteRead]
    total: int
    limit: int
    offset: int


#: The notes a page carries at most (the newest are kept).
MAX_NOTES = 500


def campaign_notes(session: Session, campaign_id: str) -> list[NoteRead]:
    """The campaign's ``note`` events, oldest first (at most :data:`MAX_NOTES`)."""
    rows = session.scalars(select(Event).where(Event.campaign_id == campaign_id,
                                               Event.kind == "note")
                           .order_by(Event.seq.desc()).limit(MAX_NOTES)).all()
    notes = []
    for event in reversed(rows):
        data = event.payload or {}
        after = data.get("after_iteration")
        notes.append(NoteRead(kind=data.get("kind"),
                              message=str(data.get("message") or data.get("kind") or "note"),
                              action=data.get("action"),
                              after_iteration=after if isinstance(after, int) else None,
                              created_at=aware(event.created_at)))
    return notes


def point_page(session: Any, campaign: Campaign, *, limit: int | None = None,
               offset: int = 0) -> PointPage:
    """A page of the campaign's points with the plot's reference lines (what ``GET
    /campaigns/{id}/points`` answers; ``tuneforge report`` builds the same from a local
    database)."""
    items, total = campaign_points(session, campaign, limit=limit, offset=offset)
    vendor = campaign.throughput(campaign.vendor_us)
    family = get_family(campaign.kernel)
    peak, peak_label = campaign_ceiling(campaign)
    return PointPage(campaign_id=campaign.id, status=campaign.status,
                     unit=family.metric.unit, peak_label=peak_label,
                     vendor=family.vendor.name if family.vendor else None,
                     vendor_us=campaign.vendor_us,
                     vendor_throughput=round(vendor, 4) if vendor else None,
                     peak=peak, started_at=aware(campaign.started_at),
                     status_colours=STATUS_COLOURS,
                     items=[PointRead.model_validate(p) for p in items],
                     notes=campaign_notes(session, campaign.id), total=total,
                     limit=limit if limit is not None else total, offset=offset)


@router.get("/{campaign_id}/points", response_model=PointPage,
            responses=error_responses(401, 404))
def points(campaign: CampaignDep, session: SessionDep,
           limit: Annotated[int, Query(ge=1, le=5000)] = 1000,
           offset: OffsetQuery = 0) -> PointPage:
    """Every candidate as a compact point, by iteration, a page at a time (``elapsed_s``:
    seconds from the campaign's start to the candidate's result)."""
    return point_page(session, campaign, limit=limit, offset=offset)
