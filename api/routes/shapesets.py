"""Shape sets: the team's sets, one set as its table, cancelling one (``POST /campaigns`` with
``shapes`` opens them)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Path, Query, status
from sqlalchemy import select

from agent import shapesets
from api.deps import OffsetQuery, SessionDep, TeamDep, is_id
from api.json_body import StrictJsonRoute
from api.schemas import ShapeSetRead, error_responses
from core.models import ShapeSet

router = APIRouter(prefix="/shape-sets", tags=["shape sets"], route_class=StrictJsonRoute)


def get_set(set_id: Annotated[str, Path()], session: SessionDep, team: TeamDep) -> ShapeSet:
    """The set, if the caller's team owns it (another team's set is a 404)."""
    found = session.get(ShapeSet, set_id) if is_id(set_id) else None
    if found is None or found.team_id != team.team_id:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no shape set {set_id[:64]!r}")
    return found


SetDep = Annotated[ShapeSet, Depends(get_set)]


@router.get("", response_model=list[ShapeSetRead], responses=error_responses(401))
def list_sets(session: SessionDep, team: TeamDep,
              limit: Annotated[int, Query(ge=1, le=100)] = 20,
              offset: OffsetQuery = 0) -> list[ShapeSetRead]:
    """The team's shape sets, newest first, each as its table."""
    rows = session.scalars(select(ShapeSet).where(ShapeSet.team_id == team.team_id)
                           .order_by(ShapeSet.created_at.desc(), ShapeSet.id)
                           .limit(limit).offset(offset)).all()
    return [ShapeSetRead.model_validate(shapesets.result(session, r)) for r in rows]


@router.get("/{set_id}", response_model=ShapeSetRead, responses=error_responses(401, 404))
def read_set(shape_set: SetDep, session: SessionDep) -> ShapeSetRead:
    """The set as one table: per shape its campaign, progress, best, x vendor, % of peak,
    GPU-seconds and evaluations served from history; the set's totals."""
    return ShapeSetRead.model_validate(shapesets.result(session, shape_set))


@router.post("/{set_id}/cancel", response_model=ShapeSetRead,
             responses=error_responses(401, 404))
def cancel_set(shape_set: SetDep, session: SessionDep) -> ShapeSetRead:
    """Cancel every member not finished (a running one keeps what it measured)."""
    shapesets.cancel(session, shape_set.id)
    session.commit()
    return ShapeSetRead.model_validate(shapesets.result(session, shape_set))
