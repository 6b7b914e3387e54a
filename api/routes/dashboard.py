"""What the dashboard needs beyond the REST resources: every candidate of a campaign as one
compact point, a page at a time (:func:`api.views.point_page`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from api.deps import CampaignDep, OffsetQuery, SessionDep
from api.json_body import StrictJsonRoute
from api.schemas import error_responses
from api.views import PointPage, point_page

router = APIRouter(prefix="/campaigns", tags=["dashboard"], route_class=StrictJsonRoute)


@router.get("/{campaign_id}/points", response_model=PointPage,
            responses=error_responses(401, 404))
def points(campaign: CampaignDep, session: SessionDep,
           limit: Annotated[int, Query(ge=1, le=5000)] = 1000,
           offset: OffsetQuery = 0) -> PointPage:
    """Every candidate as a compact point, by iteration, a page at a time (``elapsed_s``:
    seconds from the campaign's start to the candidate's result)."""
    return point_page(session, campaign, limit=limit, offset=offset)
