"""Kernel families: the built-ins and the team's own (register a declarative spec, list, read).

A team's families are its own: another team's are not listed, read (404) or run."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, HTTPException, Path, Response, status

from api.deps import SessionDep, SettingsDep, TeamDep
from api.json_body import StrictJsonRoute
from api.limits import check_rate
from api.schemas import (
    FamilyCreated,
    FamilyRead,
    FamilySummary,
    FamilyVersionRead,
    error_responses,
)
from api.views import family_list, family_version, read_family
from core import families

router = APIRouter(prefix="/families", tags=["families"], route_class=StrictJsonRoute)

SPEC_EXAMPLE = {"name": "transpose", "files": {"kernel.cu": "…"}, "tunables": {"…": ["…"]}}


@router.post("", status_code=status.HTTP_201_CREATED, response_model=FamilyCreated,
             responses={200: {"model": FamilyCreated,
                              "description": "The same content is stored already: its version"},
                        **error_responses(400, 401, 403, 409, 413, 429)})
def create(spec: Annotated[dict[str, Any], Body(examples=[SPEC_EXAMPLE], description=(
               "the family spec as one JSON object (what `tuneforge family add DIR` sends: "
               "the directory's files embedded under `files`)"))],
           session: SessionDep, team: TeamDep, settings: SettingsDep,
           response: Response) -> FamilyCreated:
    """Validate a family spec and store it as the team's next version of its name (the same
    content again is the version it was: 200). A bad spec is a 422 naming the field, a
    built-in's name a 409, a team at its quota of versions or stored bytes a 403; nothing is
    stored then. A team that sent more than its registrations a minute gets a 429 (with
    ``Retry-After``) before its spec is looked at."""
    from kernels.userspec import SpecError

    check_rate(settings, team_id=str(team.team_id), action="family registrations",
               per_minute=settings.max_family_registrations_per_minute,
               setting="TUNEFORGE_MAX_FAMILY_REGISTRATIONS_PER_MINUTE")
    try:
        done = families.register(session, spec=spec, team_id=team.team_id,
                                 created_by=team.key_prefix, quota=families.Quota(
                                     settings.max_family_versions, settings.max_family_bytes))
    except SpecError as exc:
        session.rollback()
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, [
            {"loc": ["body", exc.field] if exc.field else ["body"],
             "msg": f"{exc.field}: {exc.problem}" if exc.field else str(exc.problem),
             "type": "spec_error"}]) from None
    except families.FamilyConflict as exc:
        session.rollback()
        raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from None
    except families.QuotaExceeded as exc:
        session.rollback()
        raise HTTPException(status.HTTP_403_FORBIDDEN, str(exc)) from None
    except families.FamilyError as exc:
        session.rollback()
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, [
            {"loc": ["body", "name"], "msg": str(exc), "type": "value_error"}]) from None
    session.commit()
    if not done.created:
        response.status_code = status.HTTP_200_OK
    return FamilyCreated(name=done.name, version=done.version, key=done.key,
                         hash=done.spec_hash, created=done.created)


@router.get("", response_model=list[FamilySummary], responses=error_responses(401))
def list_families(session: SessionDep, team: TeamDep) -> list[FamilySummary]:
    """The built-in families, then the latest version of each of the team's own."""
    return family_list(session, team.team_id)


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


VersionPath = Annotated[str, Path(description="one version: NAME@vN or its key NAME@hash12")]


def _version_refused(exc: families.FamilyError) -> HTTPException:
    if isinstance(exc, families.FamilyInUse):
        return HTTPException(status.HTTP_409_CONFLICT, str(exc))
    if isinstance(exc, families.FamilyNotFound):
        return HTTPException(status.HTTP_404_NOT_FOUND, str(exc))
    return HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, [
        {"loc": ["path", "name"], "msg": str(exc), "type": "value_error"}])


@router.post("/{name}/retire", response_model=FamilyVersionRead,
             responses=error_responses(401, 404))
def retire(name: VersionPath, session: SessionDep, team: TeamDep) -> FamilyVersionRead:
    """Retire one version: new campaigns refuse it and the family's name alone stops meaning
    it; it stays readable, with the campaigns that ran it (retiring again changes nothing)."""
    try:
        row = families.retire(session, team_id=team.team_id, name=name)
    except families.FamilyError as exc:
        raise _version_refused(exc) from None
    session.commit()
    return family_version(row)


@router.post("/{name}/restore", response_model=FamilyVersionRead,
             responses=error_responses(401, 404))
def restore(name: VersionPath, session: SessionDep, team: TeamDep) -> FamilyVersionRead:
    """Bring a retired version back: new campaigns may run it again."""
    try:
        row = families.retire(session, team_id=team.team_id, name=name, retired=False)
    except families.FamilyError as exc:
        raise _version_refused(exc) from None
    session.commit()
    return family_version(row)


@router.delete("/{name}", status_code=status.HTTP_204_NO_CONTENT,
               responses=error_responses(401, 404, 409))
def delete(name: VersionPath, session: SessionDep, team: TeamDep) -> Response:
    """Delete one version that no campaign of the team ran (its stored bytes and its place in
    the quota given back); one that campaigns ran is a 409 that says to retire it."""
    try:
        families.delete(session, team_id=team.team_id, name=name)
    except families.FamilyError as exc:
        session.rollback()
        raise _version_refused(exc) from None
    session.commit()
    return Response(status_code=status.HTTP_204_NO_CONTENT)
