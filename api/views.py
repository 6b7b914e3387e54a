"""What the API shows, as plain functions of a session and the schemas they fill: a campaign's
read, a page of its points with the plot's reference lines, the families a team can run. The
routes answer with them; ``tuneforge report``, ``export`` and ``family`` print the same from a
local database (the CLI imports no route module)."""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from pydantic import BaseModel
from sqlalchemy import select
from sqlalchemy.orm import Session, defer

from agent.exports import STATUS_COLOURS, campaign_ceiling, campaign_points
from agent.report import summary
from api.schemas import (
    BudgetModel,
    CampaignRead,
    FamilyRead,
    FamilySummary,
    FamilyVersionRead,
    MetricRead,
)
from core import families
from core.models import Campaign, Candidate, Event, Family, aware
from core.statuses import CandidateStatus, FinalStatus
from kernels import family_names, get_family
from kernels.family import KernelFamily, campaign_tolerance, describe

log = logging.getLogger(__name__)

#: Columns a campaign summary never reads (kilobytes of JSON and text per candidate).
LARGE_COLUMNS = ("source", "compile_log", "feedback", "correctness", "profile", "perf")


def campaign_read(session: Any, campaign: Campaign) -> CampaignRead:
    """A campaign as the API shows it (best and baseline from :func:`agent.report.summary`)."""
    wanted = [cid for cid in (campaign.best_id, campaign.baseline_id) if cid]
    # one light query puts both in the identity map, where summary() finds them (the list
    # keeps them alive: the identity map holds weak references)
    loaded = session.scalars(select(Candidate).where(Candidate.id.in_(wanted)).options(
        *(defer(getattr(Candidate, name)) for name in LARGE_COLUMNS))).all() if wanted else []
    s = summary(session, campaign)
    del loaded
    stored = families.version_of(session, team_id=campaign.team_id, key=campaign.kernel)
    return CampaignRead(
        id=campaign.id, status=campaign.status,  # type: ignore[arg-type]
        status_reason=campaign.status_reason, kernel=campaign.kernel,
        family=stored.name if stored is not None else campaign.kernel,
        family_version=stored.version if stored is not None else None,
        shape=dict(campaign.dims), shape_text=campaign.shape_text,
        metric=MetricRead(**{k: v for k, v in campaign.metric.to_dict().items()
                             if k in MetricRead.model_fields}),
        arch=campaign.arch,
        backend=campaign.backend, gpu=campaign.gpu_name, tolerance=campaign.tolerance,
        policy=campaign.policy, accept_threshold_pct=campaign.accept_threshold_pct,
        profile=campaign.profile, parallel=campaign.parallel, seed=campaign.seed,
        budget=BudgetModel(iterations=campaign.budget_iterations,
                           wall_seconds=campaign.budget_wall_s,
                           gpu_seconds=campaign.budget_gpu_s,
                           settle_after=campaign.settle_after),
        start_from=campaign.start_from, allowed_actions=campaign.allowed_actions,
        evaluations=campaign.evaluations, gpu_seconds=campaign.gpu_seconds,
        served_from_history=s["served_from_history"], set_id=campaign.set_id,
        set_index=campaign.set_index, weight=campaign.weight,
        created_at=campaign.created_at, started_at=campaign.started_at,
        finished_at=campaign.finished_at, best=s["best"], baseline=s["baseline"],
        speedup_vs_baseline=s["speedup_vs_baseline"], vendor_us=campaign.vendor_us,
        pct_of_vendor=s["pct_of_vendor"], rank_est=s["rank_est"], sanitize=campaign.sanitize,
    )


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


# ---- families ---------------------------------------------------------------------------
def readable(value: Any) -> Any:
    """``value`` with every string valid UTF-8 (a lone surrogate, which a JSON ``\\udfff``
    escape can carry into a stored spec, shown as the text ``\\udfff``): a response never
    fails to encode on stored text."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {readable(k): readable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [readable(v) for v in value]
    return value


def _summary(family: KernelFamily, row: Family | None, versions: int) -> dict[str, Any]:
    return readable({
        "name": row.name if row is not None else family.name,
        "origin": "team" if row is not None else "builtin",
        "key": family.name, "version": row.version if row is not None else None,
        "versions": versions, "description": family.description,
        "dims": [d.name for d in family.dims], "default_shape": str(family.default_dims),
        "unit": family.metric.unit, "transforms": len(family.transforms.names()),
        "vendor": family.vendor.name if family.vendor is not None else None,
        "retired": row is not None and row.retired_at is not None,
    })


def _unbuilt(row: Family, versions: int, exc: Exception) -> dict[str, Any]:
    """The summary of a stored version that cannot be built (stored before a check that
    refuses it now): what the row says, and why."""
    spec = row.spec if isinstance(row.spec, dict) else {}
    description = spec.get("description")
    return readable({
        "name": row.name, "origin": "team", "key": row.key, "version": row.version,
        "versions": versions,
        "description": description if isinstance(description, str) else "",
        "dims": [], "default_shape": "", "unit": "", "transforms": 0, "vendor": None,
        "retired": row.retired_at is not None,
        "problem": f"this stored version cannot be built ({type(exc).__name__}: "
                   f"{str(exc)[:200]}); retire or delete it (`tuneforge family retire|delete "
                   f"{row.name}@v{row.version}`)",
    })


def _built(row: Family) -> KernelFamily | Exception:
    """The family a stored version defines, or why it cannot be built."""
    try:
        return families.family_of(row)
    except Exception as exc:  # one bad stored row never breaks a listing or a read
        log.warning("stored family %s cannot be built: %r", row.key, exc)
        return exc


def family_version(row: Family) -> FamilyVersionRead:
    """One stored version as the API shows it."""
    return _version(row)


def _version(row: Family) -> FamilyVersionRead:
    return FamilyVersionRead.model_validate(readable({
        "version": row.version, "key": row.key, "hash": row.spec_hash,
        "created_at": row.created_at, "created_by": row.created_by,
        "retired_at": row.retired_at, "size_bytes": row.size_bytes or 0}))


def family_list(session: Session, team_id: str | None) -> list[FamilySummary]:
    """The built-in families (a plug-in that fails to load is left out), then the latest
    version of each of the team's own (one that cannot be built: marked with its problem)."""
    out = []
    for name in family_names():
        try:
            out.append(FamilySummary(**_summary(get_family(name), None, 1)))
        except (ImportError, TypeError, ValueError):  # `tuneforge kernels` shows its error
            continue
    for row in families.latest(session, team_id=team_id):
        built = _built(row)
        out.append(FamilySummary(**(_unbuilt(row, row.version, built)
                                    if isinstance(built, Exception)
                                    else _summary(built, row, row.version))))
    return out


def read_family(session: Session, team_id: str | None, name: str) -> FamilyRead:
    """What ``GET /families/{name}`` answers (:class:`families.FamilyNotFound` when the team
    has no such family; a stored version that cannot be built: what its row says, marked)."""
    found = families.find(session, team_id=team_id, name=name) \
        if name not in family_names() else None
    built = _built(found) if found is not None else None
    if found is not None and isinstance(built, Exception):
        stored = families.versions(session, team_id=team_id, name=found.name)
        return FamilyRead(
            **_unbuilt(found, len(stored), built), hash=found.spec_hash, tunables={},
            transform_names=[], signature={"buffers": [], "scalars": []}, metric={},
            dim_bounds=[], correctness="", tolerance=0.0, baseline={}, distributions=[],
            edge_shapes=[], all_versions=[_version(r) for r in stored],
            spec=readable(found.spec) if isinstance(found.spec, dict) else None)
    family = built if isinstance(built, KernelFamily) \
        else families.resolve(session, team_id=team_id, name=name)
    row = families.version_of(session, team_id=team_id, key=family.name)
    stored = families.versions(session, team_id=team_id, name=row.name) if row else []
    declared = describe(family)
    return FamilyRead(**_summary(family, row, len(stored) or 1), **readable({
        "hash": row.spec_hash if row is not None else None,
        "tunables": {k: list(v) for k, v in family.domains().items()},
        "transform_names": declared["transforms"], "signature": declared["signature"],
        "metric": declared["metric"], "dim_bounds": declared["dims"],
        "correctness": declared["correctness"], "tolerance": campaign_tolerance(family, None),
        "baseline": family.baseline.to_dict(), "distributions": declared["distributions"],
        "edge_shapes": declared["edge_shapes"],
        "spec": row.spec if row is not None else None}),
        all_versions=[_version(r) for r in stored])
