"""Campaigns: submit, read, candidates, best kernel, actions, cancel, events."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Annotated, Any

from fastapi import APIRouter, Header, HTTPException, Query, Request, Response, status
from fastapi.responses import StreamingResponse
from pydantic import Field
from sqlalchemy import String, bindparam, func, literal_column, select

from agent import campaigns, shapesets
from agent.campaigns import CampaignCreate, shown
from agent.engine import lifecycle, locking
from agent.report import best_kernel
from api.deps import (
    ApiKeyDep,
    CampaignDep,
    CampaignIdPath,
    OffsetQuery,
    SessionDep,
    SettingsDep,
    TeamDep,
    get_campaign,
    is_id,
    owned_campaign_id,
)
from api.events import event_stream
from api.json_body import StrictJsonRoute
from api.schemas import (
    MAX_EVENT_ID,
    ActionsIn,
    BestRead,
    CampaignCreated,
    CampaignRead,
    CandidateDetail,
    CandidatePage,
    CandidateRead,
    error_responses,
)
from api.security import hash_key
from api.views import campaign_read
from core import families
from core.models import Campaign, Candidate
from core.queues import TaskName, enqueue
from core.statuses import CandidateStatus

router = APIRouter(prefix="/campaigns", tags=["campaigns"], route_class=StrictJsonRoute)

def _refused(field: str, message: str) -> HTTPException:
    """The 422 of a body field the route checks itself (one the schema cannot: the team's own
    families), in the schema's form."""
    return HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, [
        {"loc": ["body", field], "msg": message, "type": "value_error"}])


def _candidate_fields(c: Candidate) -> dict[str, Any]:
    return {"id": c.id, "iteration": c.iteration, "status": c.status, "action": c.action,
            "proposed_by": c.proposed_by, "parent_id": c.parent_id, "avg_us": c.avg_us,
            "accepted": c.accepted, "attempts": c.attempts, "error": c.error,
            "created_at": c.created_at, "finished_at": c.finished_at}


@router.post("", status_code=status.HTTP_201_CREATED, response_model=CampaignCreated,
             responses=error_responses(400, 401, 413))
def create(body: CampaignCreate, session: SessionDep, team: TeamDep,
           settings: SettingsDep) -> CampaignCreated:
    """Queue a campaign; the agent starts it (the API never compiles or touches a GPU)."""
    try:
        family = families.resolve(session, team_id=team.team_id, name=body.kernel,
                                  for_new=True)
    except families.FamilyError as exc:
        raise _refused("kernel", str(exc)) from None
    try:
        if body.shapes is not None:
            shape_set = shapesets.open_set(
                session, body, family=family, arch=settings.arch, team_id=team.team_id,
                backend=settings.backend, default_parallel=campaigns.SERVICE_PARALLEL)
            ids = [m.id for m in shapesets.members(session, shape_set.id)]
        else:
            campaign = campaigns.open_campaign(session, body, family=family,
                                               arch=settings.arch, team_id=team.team_id,
                                               backend=settings.backend)
    except locking.CampaignError as exc:
        session.rollback()
        field = str(exc).split(":", 1)[0]  # the engine's messages start with the field's name
        loc = ["body", field] if field in CampaignCreate.model_fields else ["body"]
        message = str(exc).removeprefix(f"{field}: ") if field in ("shape", "allowed_actions") \
            else str(exc)
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, [
            {"loc": loc, "msg": message, "type": "value_error"}]) from None
    session.commit()
    if body.shapes is not None:
        enqueue(TaskName.DECIDE, ids[0])  # the others start in turn, as each one ends
        return CampaignCreated(id=shape_set.id, status="queued", kind="shape_set",
                               campaigns=ids)
    enqueue(TaskName.DECIDE, campaign.id)
    return CampaignCreated(id=campaign.id, status="queued")


@router.get("", response_model=list[CampaignRead], responses=error_responses(401))
def list_campaigns(session: SessionDep, team: TeamDep,
                   limit: Annotated[int, Query(ge=1, le=200)] = 50,
                   offset: OffsetQuery = 0) -> list[CampaignRead]:
    """The team's campaigns, newest first."""
    rows = session.scalars(
        select(Campaign).where(Campaign.team_id == team.team_id)
        .order_by(Campaign.created_at.desc(), Campaign.id).limit(limit).offset(offset)
    ).all()
    return [campaign_read(session, c) for c in rows]


class _ReadCache:
    """Campaign reads as JSON, each kept with the version of the campaign's row it was built
    from (PostgreSQL's ``xmin``: every committed update of a row writes a new version).

    A read shows the campaign row and its best and baseline candidates; those are finished
    candidates, whose figures never change, and a new best or baseline is an update of the
    row. So a read whose row version matches is the same bytes, and a read of a busy campaign
    costs one small query and no ORM, model or JSON work (100 clients polling a campaign).
    """

    def __init__(self, size: int = 1024) -> None:
        self.size = size
        self._bodies: OrderedDict[str, tuple[str, bytes]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, campaign_id: str, version: str) -> bytes | None:
        """The JSON of this version of the campaign, if built before."""
        with self._lock:
            found = self._bodies.get(campaign_id)
            if found is None or found[0] != version:
                return None
            self._bodies.move_to_end(campaign_id)
            return found[1]

    def put(self, campaign_id: str, version: str, body: bytes) -> None:
        """Keep the JSON of this version (the least recently read campaign goes first)."""
        with self._lock:
            self._bodies[campaign_id] = (version, body)
            self._bodies.move_to_end(campaign_id)
            while len(self._bodies) > self.size:
                self._bodies.popitem(last=False)


READS = _ReadCache()
_ROW_VERSION = literal_column("campaigns.xmin::text", String).label("version")
_VERSION = select(Campaign.team_id, _ROW_VERSION).where(Campaign.id == bindparam("id"))
_WITH_VERSION = select(Campaign, _ROW_VERSION).where(Campaign.id == bindparam("id"))


@router.get("/{campaign_id}", response_model=CampaignRead, responses=error_responses(401, 404))
def read(campaign_id: CampaignIdPath, session: SessionDep,
         team: TeamDep) -> Response:
    """Status, evaluations and the best result so far."""
    missing = HTTPException(status.HTTP_404_NOT_FOUND, f"no campaign {shown(campaign_id)}")
    if not is_id(campaign_id):
        raise missing
    if session.get_bind().dialect.name != "postgresql":  # no row versions: build it each time
        campaign = get_campaign(campaign_id, session, team)
        return _json(campaign_read(session, campaign).model_dump_json().encode())
    row = session.execute(_VERSION, {"id": campaign_id}).first()
    if row is None or row.team_id != team.team_id:
        raise missing
    body = READS.get(campaign_id, row.version)
    if body is None:
        campaign, version = session.execute(_WITH_VERSION, {"id": campaign_id}).one()
        body = campaign_read(session, campaign).model_dump_json().encode()
        READS.put(campaign_id, version, body)
    return _json(body)


def _json(body: bytes) -> Response:
    return Response(body, media_type="application/json")


@router.get("/{campaign_id}/candidates", response_model=CandidatePage,
            responses=error_responses(401, 404))
def candidates(campaign: CampaignDep, session: SessionDep,
               limit: Annotated[int, Query(ge=1, le=500)] = 100,
               offset: OffsetQuery = 0,
               status_filter: Annotated[CandidateStatus | None,
                                        Query(alias="status")] = None) -> CandidatePage:
    """Candidates by iteration, a page at a time, optionally of one status."""
    where = [Candidate.campaign_id == campaign.id]
    if status_filter is not None:
        where.append(Candidate.status == status_filter)
    total = session.scalar(select(func.count()).select_from(Candidate).where(*where)) or 0
    rows = session.scalars(select(Candidate).where(*where).order_by(Candidate.iteration)
                           .limit(limit).offset(offset)).all()
    return CandidatePage(items=[CandidateRead(**_candidate_fields(c)) for c in rows],
                         total=total, limit=limit, offset=offset)


@router.get("/{campaign_id}/candidates/{candidate_id}", response_model=CandidateDetail,
            responses=error_responses(401, 404))
def candidate(campaign: CampaignDep, session: SessionDep,
              candidate_id: CampaignIdPath) -> CandidateDetail:
    """One candidate: its feedback record and its CUDA source."""
    c = session.get(Candidate, candidate_id) if is_id(candidate_id) else None
    if c is None or c.campaign_id != campaign.id:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no candidate {shown(candidate_id)} in "
                                                       f"campaign {campaign.id}")
    return CandidateDetail(**_candidate_fields(c), params=c.params, reason=c.reason,
                           source_hash=c.source_hash, source=c.source, feedback=c.feedback,
                           compile_log=c.compile_log, sanitizer=c.sanitizer)


@router.get("/{campaign_id}/best", response_model=BestRead, responses=error_responses(401, 404))
def best(campaign: CampaignDep, session: SessionDep) -> BestRead:
    """The best kernel so far: source, launch configuration, provenance."""
    found = best_kernel(session, campaign)
    if found is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND,
                            f"campaign {campaign.id} has no correct kernel yet "
                            f"(status {campaign.status})")
    return BestRead(campaign_id=campaign.id, candidate_id=found["provenance"]["candidate_id"],
                    source=found["source"], launch=found["launch"],
                    provenance=found["provenance"])


@router.post("/{campaign_id}/actions", response_model=CampaignRead,
             responses=error_responses(400, 401, 404, 409, 413))
def inject(campaign: CampaignDep, session: SessionDep, body: ActionsIn) -> CampaignRead:
    """Give the running campaign new actions (the agent tries them next)."""
    try:
        updated = lifecycle.inject_actions(session, campaign.id, body.actions)
    except locking.CampaignError as exc:
        session.rollback()
        code = (status.HTTP_409_CONFLICT if str(exc).startswith("campaign is")
                else status.HTTP_422_UNPROCESSABLE_CONTENT)
        detail: Any = str(exc) if code == status.HTTP_409_CONFLICT else [
            {"loc": ["body", "actions"], "msg": str(exc), "type": "value_error"}]
        raise HTTPException(code, detail) from None
    session.commit()
    enqueue(TaskName.DECIDE, campaign.id)
    return campaign_read(session, updated)


@router.post("/{campaign_id}/cancel", response_model=CampaignRead,
             responses=error_responses(401, 404, 409))
def cancel(campaign: CampaignDep, session: SessionDep) -> CampaignRead:
    """Stop proposing; candidates in flight are recorded as they finish. A campaign cancelled
    already is answered as it is; one that ended otherwise (done, failed) is a 409."""
    updated = lifecycle.cancel_campaign(session, campaign.id)  # under the row lock: no-op if ended
    if updated.status != "cancelled":
        detail = (f"campaign is {updated.status} ({updated.status_reason}): it has nothing "
                  "left to cancel")
        session.rollback()
        raise HTTPException(status.HTTP_409_CONFLICT, detail)
    session.commit()
    return campaign_read(session, updated)


EventId = Annotated[int, Field(ge=0, le=MAX_EVENT_ID)]


@router.get("/{campaign_id}/events", response_class=StreamingResponse, responses={
    200: {"description": "The event stream: `id`, `event` and a JSON `data` line per event",
          "content": {"text/event-stream": {"schema": {"type": "string"}}}},
    **error_responses(401, 404)})
async def events(campaign_id: CampaignIdPath, request: Request, x_api_key: ApiKeyDep = None,
                 after: Annotated[EventId | None, Query(
                     description="resume after this event id")] = None,
                 last_event_id: Annotated[EventId | None, Header(
                     alias="Last-Event-ID", description="resume after this event id")] = None
                 ) -> StreamingResponse:
    """Server-sent events of the campaign (from its event log), until it finishes.

    Resumes after ``?after=`` or else the ``Last-Event-ID`` header, when given."""
    start = after if after is not None else last_event_id or 0
    # checked without the request's session: a dependency's session would stay with the
    # stream until it ends (api.deps.owned_campaign_id)
    owned = await owned_campaign_id(campaign_id, x_api_key)
    key_hash = hash_key(x_api_key) if x_api_key else None  # the stream ends once it is revoked
    return StreamingResponse(event_stream(owned, start, request, key_hash),
                             media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
