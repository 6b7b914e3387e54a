"""The team's library: the best known point at every shape it measured, and what runs at a
shape nobody measured (``agent/library.py``'s dispatch rule); a probe measures that once."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Path, Query, status
from pydantic import BaseModel, Field

from agent import campaigns, library
from agent.campaigns import ShapeModel, _In
from agent.engine.locking import CampaignError
from api.deps import SessionDep, SettingsDep, TeamDep
from api.json_body import StrictJsonRoute
from api.schemas import error_responses
from core import families
from core.queues import TaskName, enqueue

router = APIRouter(prefix="/library", tags=["library"], route_class=StrictJsonRoute)

FamilyPath = Annotated[str, Path(description=(
    "a built-in family's name, or one of the team's own: NAME, NAME@vN or NAME@hash12"))]
GpuQuery = Annotated[str | None, Query(max_length=128, description=(
    "the GPU model (as the driver names it); default: the one the team measured most"))]


class LibraryRead(BaseModel):
    """The library of one family on one GPU model."""

    family: str
    gpu: str | None
    #: every GPU model the team measured this family on
    gpus: list[str]
    #: the SMs of ``gpu`` (what an export sizes persistent grids for)
    sm_count: int | None = None
    #: how a shape is dispatched (the rule in words)
    rule: str
    entries: list[dict[str, Any]]


class PickRead(BaseModel):
    """What runs at one shape, and why."""

    shape: str
    kind: str
    params: dict[str, Any] | None
    measured_at_shape: bool
    from_shape: str | None
    avg_us: float | None
    vendor_us: float | None
    rule: int
    reason: str


#: Shapes one ``POST /library/{family}/picks`` may ask about.
MAX_PICKS = 1024
ShapeText = Annotated[str, Field(min_length=1, max_length=200, examples=["8192x8192"])]


class PicksIn(_In):
    """``POST /library/{family}/picks``: the shapes a program runs, as the family writes them
    (``4096x4096x4096``, ``rows=8192,cols=32768``)."""

    shapes: list[ShapeText] = Field(min_length=1, max_length=MAX_PICKS)
    gpu: str | None = Field(default=None, max_length=128, description=(
        "the GPU model (as the driver names it); default: the one the team measured most"))


class ProbeIn(_In):
    """``POST /library/{family}/probe``: shapes at which to measure the library's picks."""

    shapes: list[ShapeModel] = Field(min_length=1, max_length=64)


class ProbeCreated(BaseModel):
    """The probe campaigns, one a shape (each measures the library's fallback points there)."""

    campaigns: list[str]


RULE = (library.__doc__ or "").split("**The dispatch rule**", 1)[-1].strip()


def _family(session: Any, team_id: str | None, name: str) -> Any:
    try:
        return families.resolve(session, team_id=team_id, name=name)
    except families.FamilyError as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from None


@router.get("/{family}", response_model=LibraryRead, responses=error_responses(401, 404))
def read_library(family: FamilyPath, session: SessionDep, team: TeamDep,
                 gpu: GpuQuery = None) -> LibraryRead:
    """The best known point at every shape the team measured, with its provenance (campaign,
    iteration, time, date, commit), its time and the vendor's."""
    found = _family(session, team.team_id, family)
    models = library.gpus(session, team_id=team.team_id, kernel=found.name)
    model = gpu or next(iter(models), None)
    rows = library.entries(session, team_id=team.team_id, kernel=found.name, gpu=model) \
        if model is not None else []
    sm_count = library.device(session, team_id=team.team_id, kernel=found.name,
                              gpu=model).get("sm_count")
    return LibraryRead(family=found.name, gpu=model, gpus=models, rule=RULE,
                       sm_count=int(sm_count) if sm_count else None,
                       entries=[e.to_dict() for e in rows])


@router.get("/{family}/pick", response_model=PickRead, responses=error_responses(401, 404))
def pick(family: FamilyPath, session: SessionDep, team: TeamDep, settings: SettingsDep,
         shape: Annotated[str, Query(max_length=200, description=(
             "the shape as the family writes it: 4096x4096x4096, rows=8192,cols=32768"))],
         gpu: GpuQuery = None) -> PickRead:
    """What the library runs at ``shape``: a point measured there, the nearest measured
    shape's best valid there, or the vendor, with the rule that picked it."""
    found = _family(session, team.team_id, family)
    try:
        dims = found.parse_dims(shape)
    except ValueError as exc:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, [
            {"loc": ["query", "shape"], "msg": str(exc), "type": "value_error"}]) from None
    chosen = library.pick(session, team_id=team.team_id, kernel=found.name,
                          shape=dims.as_dict(), gpu=gpu, arch=settings.arch)
    return PickRead(**chosen.to_dict())


@router.post("/{family}/picks", response_model=list[PickRead],
             responses=error_responses(400, 401, 404, 413))
def picks(family: FamilyPath, body: PicksIn, session: SessionDep, team: TeamDep,
          settings: SettingsDep) -> list[PickRead]:
    """What the library runs at each of ``shapes``, in their order, from one read of the
    library (``GET .../pick`` reads it for each shape): what ``library export --shapes``
    asks for a program's shapes. Nothing is stored."""
    found = _family(session, team.team_id, family)
    wanted = []
    for i, shape in enumerate(body.shapes):
        try:
            wanted.append(found.parse_dims(shape))
        except ValueError as exc:
            raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, [
                {"loc": ["body", "shapes", i], "msg": str(exc), "type": "value_error"}]
            ) from None
    return [PickRead(**chosen.to_dict()) for chosen in library.picks(
        session, team_id=team.team_id, kernel=found.name, shapes=[d.as_dict() for d in wanted],
        gpu=body.gpu, arch=settings.arch)]


@router.post("/{family}/probe", status_code=status.HTTP_201_CREATED,
             response_model=ProbeCreated, responses=error_responses(400, 401, 404, 413))
def probe(family: FamilyPath, body: ProbeIn, session: SessionDep, team: TeamDep,
          settings: SettingsDep) -> ProbeCreated:
    """Measure the library's fallback points once at each shape (a campaign each, starting
    from them): from then on the library answers there from what was measured."""
    found = _family(session, team.team_id, family)
    ids = []
    #: read once: the probes are only queued here, so none adds to the library in this loop
    known = library.entries(session, team_id=team.team_id, kernel=found.name)
    for i, shape in enumerate(body.shapes):
        try:
            dims = found.make_dims(shape)
            campaigns.check_fits_gpu_memory(found, dims)
        except ValueError as exc:
            raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, [
                {"loc": ["body", "shapes", i], "msg": str(exc), "type": "value_error"}]
            ) from None
        points = library.fallback_points(session, team_id=team.team_id, kernel=found.name,
                                         shape=dims.as_dict(), arch=settings.arch, known=known)
        request = campaigns.CampaignCreate.model_validate(
            {"kernel": found.name, "shape": dims.as_dict(), "start_from": "library",
             "budget": {"iterations": 1 + len(points)}}, context={"family": found})
        try:
            created = campaigns.open_campaign(session, request, family=found,
                                              arch=settings.arch, team_id=team.team_id,
                                              backend=settings.backend)
        except CampaignError as exc:
            session.rollback()
            raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, [
                {"loc": ["body", "shapes", i], "msg": str(exc), "type": "value_error"}]
            ) from None
        ids.append(created.id)
    session.commit()
    for cid in ids:
        enqueue(TaskName.DECIDE, cid)
    return ProbeCreated(campaigns=ids)

