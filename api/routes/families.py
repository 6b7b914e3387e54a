"""Kernel families: the built-ins and the team's own (register a declarative spec, list, read).

A team's families are its own: another team's are not listed, read (404) or run."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, HTTPException, Path, Response, status
from sqlalchemy.orm import Session

from api.deps import SessionDep, TeamDep
from api.json_body import StrictJsonRoute
from api.schemas import (
    FamilyCreated,
    FamilyRead,
    FamilySummary,
    FamilyVersionRead,
    error_responses,
)
from core import families
from core.models import Family
from kernels import family_names, get_family
from kernels.family import KernelFamily, campaign_tolerance, describe

router = APIRouter(prefix="/families", tags=["families"], route_class=StrictJsonRoute)

SPEC_EXAMPLE = {"name": "transpose", "files": {"kernel.cu": "…"}, "tunables": {"…": ["…"]}}


def _summary(family: KernelFamily, row: Family | None, versions: int) -> dict[str, Any]:
    return {
        "name": row.name if row is not None else family.name,
        "origin": "team" if row is not None else "builtin",
        "key": family.name, "version": row.version if row is not None else None,
        "versions": versions, "description": family.description,
        "dims": [d.name for d in family.dims], "default_shape": str(family.default_dims),
        "unit": family.metric.unit, "transforms": len(family.transforms.names()),
        "vendor": family.vendor.name if family.vendor is not None else None,
    }


def _version(row: Family) -> FamilyVersionRead:
    return FamilyVersionRead(version=row.version, key=row.key, hash=row.spec_hash,
                             created_at=row.created_at, created_by=row.created_by)


@router.post("", status_code=status.HTTP_201_CREATED, response_model=FamilyCreated,
             responses={200: {"model": FamilyCreated,
                              "description": "The same content is stored already: its version"},
                        **error_responses(400, 401, 409, 413)})
def create(spec: Annotated[dict[str, Any], Body(examples=[SPEC_EXAMPLE], description=(
               "the family spec as one JSON object (what `tuneforge family add DIR` sends: "
               "the directory's files embedded under `files`)"))],
           session: SessionDep, team: TeamDep, response: Response) -> FamilyCreated:
    """Validate a family spec and store it as the team's next version of its name (the same
    content again is the version it was: 200). A bad spec is a 422 naming the field, a
    built-in's name a 409; nothing is stored then."""
    from kernels.userspec import SpecError

    try:
        done = families.register(session, spec=spec, team_id=team.team_id,
                                 created_by=team.key_prefix)
    except SpecError as exc:
        session.rollback()
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, [
            {"loc": ["body", exc.field] if exc.field else ["body"],
             "msg": f"{exc.field}: {exc.problem}" if exc.field else str(exc.problem),
             "type": "spec_error"}]) from None
    except families.FamilyConflict as exc:
        session.rollback()
        raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from None
    except families.FamilyError as exc:
        session.rollback()
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, [
            {"loc": ["body", "name"], "msg": str(exc), "type": "value_error"}]) from None
    session.commit()
    if not done.created:
        response.status_code = status.HTTP_200_OK
    return FamilyCreated(name=done.name, version=done.version, key=done.key,
                         hash=done.spec_hash, created=done.created)


def family_list(session: Session, team_id: str | None) -> list[FamilySummary]:
    """The built-in families (a plug-in that fails to load is left out), then the latest
    version of each of the team's own."""
    out = []
    for name in family_names():
        try:
            out.append(FamilySummary(**_summary(get_family(name), None, 1)))
        except (ImportError, TypeError, ValueError):  # `tuneforge kernels` shows its error
            continue
    for row in families.latest(session, team_id=team_id):
        out.append(FamilySummary(**_summary(families.family_of(row), row, row.version)))
    return out


@router.get("", response_model=list[FamilySummary], responses=error_responses(401))
def list_families(session: SessionDep, team: TeamDep) -> list[FamilySummary]:
    """The built-in families, then the latest version of each of the team's own."""
    return family_list(session, team.team_id)


def read_family(session: Session, team_id: str | None, name: str) -> FamilyRead:
    """What ``GET /families/{name}`` answers (:class:`families.FamilyNotFound` when the team
    has no such family)."""
    family = families.resolve(session, team_id=team_id, name=name)
    row = families.version_of(session, team_id=team_id, key=family.name)
    stored = families.versions(session, team_id=team_id, name=row.name) if row else []
    declared = describe(family)
    return FamilyRead(
        **_summary(family, row, len(stored) or 1),
        hash=row.spec_hash if row is not None else None,
        tunables={k: list(v) for k, v in family.domains().items()},
        transform_names=declared["transforms"], signature=declared["signature"],
        metric=declared["metric"], dim_bounds=declared["dims"],
        correctness=declared["correctness"], tolerance=campaign_tolerance(family, None),
        baseline=family.baseline.to_dict(), distributions=declared["distributions"],
        edge_shapes=declared["edge_shapes"], all_versions=[_version(r) for r in stored],
        spec=row.spec if row is not None else None)


@router.get("/{name}", response_model=FamilyRead, responses=error_responses(401, 404))
def read(name: Annotated[str, Path(description=(
             "a built-in's name, a team family's name (its latest version), NAME@vN or its "
             "key NAME@hash12"))],
         session: SessionDep, team: TeamDep) -> FamilyRead:
    """A family: its dimensions, signature, metric, tunables, transforms and versions."""
    try:
        return read_family(session, team.team_id, name)
    except families.FamilyNotFound as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from None
