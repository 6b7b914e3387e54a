"""Request and response bodies of the REST API (pydantic; never ORM objects)."""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal, get_args

from pydantic import BaseModel, Field

from agent.campaigns import (
    ActionText,
    BudgetModel,
    ShapeModel,
    _In,
)
from core.models import CAMPAIGN_STATUSES
from core.statuses import CandidateStatus

CampaignStatus = Literal["queued", "running", "done", "failed", "cancelled"]
assert set(get_args(CampaignStatus)) == set(CAMPAIGN_STATUSES)

#: Largest ``offset`` of a paged listing (a row count no table reaches; a larger one would
#: overflow the database's integer).
MAX_OFFSET = 2**31 - 1
#: Largest event id (the database's ``bigint``).
MAX_EVENT_ID = 2**63 - 1


class MetricRead(BaseModel):
    """A family's work metric: what ``throughput`` figures are in."""

    kind: Literal["flops", "bytes"]
    unit: str
    peak: str
    peak_label: str


class CampaignCreated(BaseModel):
    """``201`` answer of ``POST /campaigns``: a campaign, or a shape set (``kind``) whose member
    campaigns are listed in the order they run (``GET /shape-sets/{id}`` follows it)."""

    id: str
    status: CampaignStatus
    kind: Literal["campaign", "shape_set"] = "campaign"
    campaigns: list[str] | None = None


class SetMemberRead(BaseModel):
    """One shape of a shape set: its campaign, its progress and its best so far."""

    campaign_id: str
    shape: str
    weight: float
    status: CampaignStatus
    reason: str | None
    evaluations: int
    #: its share of the set's budget (set as it starts)
    budget: int
    gpu_seconds: float
    served_from_history: int
    best: dict[str, Any] | None
    vendor_us: float | None
    #: the best's speed over the vendor's (vendor time / best time)
    x_vendor: float | None
    pct_of_peak: float | None


class ShapeSetRead(BaseModel):
    """A shape set as one table: a row a shape, with the set's totals."""

    set_id: str
    kernel: str
    #: the family's metric unit of the members' ``throughput``
    unit: str
    status: CampaignStatus
    reason: str | None
    budget: int
    evaluations: int
    gpu_seconds: float
    served_from_history: int
    wall_seconds: float | None
    shapes: list[SetMemberRead]


class PointSummary(BaseModel):
    """A measured candidate in a summary."""

    candidate_id: str
    iteration: int
    params: dict[str, Any]
    avg_us: float
    #: in the campaign's ``metric.unit``
    throughput: float
    #: the seed's field (a flops metric only)
    throughput_tflops: float | None = None
    action: str | None = None


class CampaignRead(BaseModel):
    """A campaign, its progress and its best result so far."""

    id: str
    status: CampaignStatus
    status_reason: str | None
    #: the family's registry key: a built-in's name, or a team family's ``name@hash12``
    kernel: str
    #: the family as people call it (a team family's spec name; a built-in's name)
    family: str | None = None
    #: the version of a team's own family the campaign runs (None: a built-in)
    family_version: int | None = None
    shape: ShapeModel
    #: the shape as text (``4096x4096x4096``)
    shape_text: str
    metric: MetricRead
    arch: str
    backend: str
    gpu: str | None
    tolerance: float
    policy: str
    accept_threshold_pct: float
    profile: str
    parallel: int
    seed: int
    budget: BudgetModel
    start_from: str | None
    allowed_actions: list[str] | None
    evaluations: int
    #: GPU time its evaluations took (those served from the team's history took none)
    gpu_seconds: float
    #: evaluations served from the team's history (each links to the original measurement)
    served_from_history: int = 0
    #: the shape set this campaign is a member of, its place there (from 0) and its weight
    set_id: str | None = None
    set_index: int | None = None
    weight: float = 1.0
    created_at: dt.datetime
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    best: PointSummary | None
    baseline: PointSummary | None
    speedup_vs_baseline: float | None
    vendor_us: float | None
    #: the best kernel's speed against the vendor's, in % (the vendor's time over the best's:
    #: 407 is 4.07× the vendor)
    pct_of_vendor: float | None
    rank_est: int | None
    sanitize: bool = False


class CandidateRead(BaseModel):
    """One candidate in a listing."""

    id: str
    iteration: int
    status: CandidateStatus
    action: str | None
    proposed_by: str | None
    parent_id: str | None
    avg_us: float | None
    accepted: bool
    attempts: int
    error: str | None
    created_at: dt.datetime
    finished_at: dt.datetime | None


class CandidateDetail(CandidateRead):
    """One candidate with its whole feedback record and its source."""

    params: dict[str, Any]
    reason: str | None
    source_hash: str | None
    source: str | None
    feedback: dict[str, Any] | None
    compile_log: str | None
    #: the compute-sanitizer gate's record (``tuneforge sanitize``), when it was checked
    sanitizer: dict[str, Any] | None = None


class CandidatePage(BaseModel):
    """A page of candidates, by iteration."""

    items: list[CandidateRead]
    total: int
    limit: int
    offset: int


class BestRead(BaseModel):
    """The best kernel: CUDA source, launch configuration, provenance."""

    campaign_id: str
    candidate_id: str
    source: str
    launch: dict[str, Any] | None
    provenance: dict[str, Any]


class ActionsIn(_In):
    """``POST /campaigns/{id}/actions``: transforms given to a running campaign."""

    actions: list[ActionText] = Field(min_length=1, max_length=32)


class HistoryEntry(BaseModel):
    """The team's best result for one kernel, shape and GPU."""

    kernel: str
    shape: ShapeModel
    shape_text: str
    gpu: str | None
    backend: str
    avg_us: float
    throughput: float
    unit: str
    params: dict[str, Any]
    campaign_id: str
    candidate_id: str
    campaigns: int
    finished_at: dt.datetime | None
    #: the family the kernel key belongs to and its version (a built-in: its name, None)
    family: str | None = None
    family_version: int | None = None


class WorkerRead(BaseModel):
    """A live worker process (from its heartbeats)."""

    name: str
    role: str
    host: str
    backend: str | None
    gpu: dict[str, Any] | None
    last_seen: dt.datetime
    evaluations: int = Field(description="evaluations done (a GPU worker), compiles done (a "
                                         "compile worker), or steps taken (an agent: results "
                                         "recorded, decisions)")
    busy_seconds: float = Field(description="seconds spent on them (busy / wall time is the "
                                            "process's utilization)")


class FamilyCreated(BaseModel):
    """``POST /families``: the version the spec is (201 a new one, 200 one stored already)."""

    name: str
    version: int
    #: the registry key (``name@hash12``): what campaigns of this version store as ``kernel``
    key: str
    #: SHA-256 of the normalized spec
    hash: str
    created: bool


class FamilyVersionRead(BaseModel):
    """One stored version of a team's family."""

    version: int
    key: str
    hash: str
    created_at: dt.datetime
    created_by: str | None
    #: when its owner retired it (new campaigns refuse it; it stays readable), else None
    retired_at: dt.datetime | None = None
    #: the bytes its spec takes stored (the team's quota adds them up)
    size_bytes: int = 0


class FamilySummary(BaseModel):
    """A family in ``GET /families``: a built-in, or the latest version of the team's own."""

    name: str
    origin: Literal["builtin", "team"]
    key: str
    version: int | None
    versions: int
    description: str
    dims: list[str]
    default_shape: str
    unit: str
    transforms: int
    #: the vendor baseline a campaign of it is compared with (``cuBLAS fp32``); None: none
    vendor: str | None = None
    #: this version is retired: readable, refused to new campaigns
    retired: bool = False
    #: why this stored version cannot be built or shown in full (stored before a check that
    #: refuses it now); None when it can
    problem: str | None = None


class FamilyRead(FamilySummary):
    """``GET /families/{name}``: what the family declares (the version the name names)."""

    hash: str | None
    #: each tunable parameter and its values
    tunables: dict[str, list[Any]]
    transform_names: list[str]
    signature: dict[str, Any]
    metric: dict[str, Any]
    dim_bounds: list[dict[str, Any]]
    correctness: str
    #: the tolerance a campaign of it runs at when the submitter gives none
    tolerance: float
    #: the baseline point: where a campaign starts
    baseline: dict[str, Any]
    distributions: list[str]
    edge_shapes: list[str]
    all_versions: list[FamilyVersionRead]
    #: the team's spec of this version (what ``POST /families`` stored; None for a built-in)
    spec: dict[str, Any] | None = None


class ErrorRead(BaseModel):
    """A refused request (every 4xx but 422): what is wrong, and what to do about it."""

    detail: str


ERROR_DESCRIPTIONS = {
    400: "The body cannot be read (not UTF-8, or JSON too deep or with too long a number)",
    401: "No X-API-Key header, or an unknown or revoked key; on the fleet-wide views, a "
         "wrong operator token (X-Operator-Token or Authorization: Bearer)",
    403: "A fleet-wide view (every team's): it needs the operator's token "
         "(X-Operator-Token or Authorization: Bearer; TUNEFORGE_OPERATOR_TOKEN); or a team's "
         "quota on family versions or stored bytes is full",
    404: "No such campaign, candidate or kernel family among the caller's team's",
    409: "The campaign is finished: it takes no new actions, and one that is done or failed "
         "has nothing left to cancel; or a family takes a built-in family's name",
    413: "The body is larger than TUNEFORGE_MAX_BODY_BYTES",
    429: "The team sent more than TUNEFORGE_MAX_FAMILY_REGISTRATIONS_PER_MINUTE family "
         "registrations this minute (Retry-After says when to try again)",
}


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for the error codes an operation may answer."""
    return {code: {"model": ErrorRead, "description": ERROR_DESCRIPTIONS[code]}
            for code in codes}
