"""What the dashboard and ``tuneforge report``/``export`` need beyond the REST resources: every
candidate of a campaign as one compact point (status, time, decision and its reason, elapsed
seconds, parameters), with the cuBLAS and FP32-peak lines of the plot."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel

from agent.exports import aware, campaign_points, peak_tflops, tflops
from api.deps import CampaignDep, OffsetQuery, SessionDep
from api.json_body import StrictJsonRoute
from api.schemas import CandidateStatus, error_responses

router = APIRouter(prefix="/campaigns", tags=["dashboard"], route_class=StrictJsonRoute)


class DecisionRead(BaseModel):
    """What the agent made of a candidate."""

    accepted: bool | None
    improvement_pct: float | None
    reason: str | None


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
    tflops: float | None
    runs_us: list[float] | None
    decision: DecisionRead | None
    compile_s: float | None
    gpu_seconds: float
    created_at: dt.datetime | None
    finished_at: dt.datetime | None
    elapsed_s: float | None
    params: dict[str, Any]
    error: str | None


class PointPage(BaseModel):
    """A page of points by iteration, and the plot's reference lines."""

    campaign_id: str
    status: str
    vendor_us: float | None
    vendor_tflops: float | None
    peak_tflops: float | None
    started_at: dt.datetime | None
    items: list[PointRead]
    total: int
    limit: int
    offset: int


@router.get("/{campaign_id}/points", response_model=PointPage,
            responses=error_responses(401, 404))
def points(campaign: CampaignDep, session: SessionDep,
           limit: Annotated[int, Query(ge=1, le=5000)] = 1000,
           offset: OffsetQuery = 0) -> PointPage:
    """Every candidate as a compact point, by iteration, a page at a time (``elapsed_s``:
    seconds from the campaign's start to the candidate's result)."""
    items, total = campaign_points(session, campaign, limit=limit, offset=offset)
    vendor = tflops(campaign.m, campaign.n, campaign.k, campaign.vendor_us)
    return PointPage(campaign_id=campaign.id, status=campaign.status,
                     vendor_us=campaign.vendor_us,
                     vendor_tflops=round(vendor, 4) if vendor else None,
                     peak_tflops=peak_tflops(campaign), started_at=aware(campaign.started_at),
                     items=[PointRead.model_validate(p) for p in items], total=total,
                     limit=limit, offset=offset)
