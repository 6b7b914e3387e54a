"""Request and response bodies of the REST API (pydantic; never ORM objects)."""

from __future__ import annotations

import datetime as dt
import math
import re
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from agent.policies import POLICY_NAMES
from core.models import CAMPAIGN_STATUSES
from core.settings import get_settings
from core.statuses import CandidateStatus
from kernels import family_names, get_family

CampaignStatus = Literal["queued", "running", "done", "failed", "cancelled"]
assert set(get_args(CampaignStatus)) == set(CAMPAIGN_STATUSES)

#: Largest ``offset`` of a paged listing (a row count no table reaches; a larger one would
#: overflow the database's integer).
MAX_OFFSET = 2**31 - 1
#: Largest event id (the database's ``bigint``).
MAX_EVENT_ID = 2**63 - 1
#: Text without control characters (PostgreSQL text cannot hold NUL; none belongs in a name).
PRINTABLE = r"^[^\x00-\x1f\x7f]*$"
#: characters of a client's value that a message quotes (a 422 or 404 never echoes a whole input)
SHOWN_CHARS = 64


def shown(value: str) -> str:
    """``value`` quoted for a message: its first :data:`SHOWN_CHARS` characters, and how many
    more it had."""
    if len(value) <= SHOWN_CHARS:
        return repr(value)
    return f"{value[:SHOWN_CHARS]!r}… ({len(value)} characters)"
#: An action as written in ``POST /campaigns/{id}/actions``, e.g. ``apply_unroll(4)``.
ActionText = Annotated[str, Field(min_length=1, max_length=200, pattern=PRINTABLE)]


class _In(BaseModel):
    """A request body: unknown fields are refused, and so are values of the wrong JSON type
    (``"8"`` or ``true`` for a size, ``4.5`` for an integer)."""

    model_config = ConfigDict(extra="forbid", strict=True)


#: A problem shape: the family's dimensions by name (``{"m": 4096, "n": 4096, "k": 4096}``,
#: ``{"rows": 8192, "cols": 32768}``); checked against the family's bounds.
ShapeModel = Annotated[dict[str, int], Field(min_length=1, max_length=16,
                                             examples=[{"m": 4096, "n": 4096, "k": 4096}])]


class MetricRead(BaseModel):
    """A family's work metric: what ``throughput`` figures are in."""

    kind: Literal["flops", "bytes"]
    unit: str
    peak: str
    peak_label: str


def check_fits_gpu_memory(family: Any, dims: Any) -> None:
    """``ValueError`` when one evaluation's buffers (and their float64 reference) exceed the
    GPU memory a campaign may use."""
    limit_gib = get_settings().gpu_memory_gib
    need = family.signature.nbytes(dims)
    if need > limit_gib * 2**30:
        names = ", ".join(b.name for b in family.signature.buffers)
        raise ValueError(
            f"{dims} needs {math.ceil(need / 2**30 * 10) / 10:g} GiB for {names} "
            f"and the fp64 reference, more than the {limit_gib:g} GiB a campaign may use "
            "(TUNEFORGE_GPU_MEMORY_GIB)")


#: A name that may be one of a team's own families (``NAME``, ``NAME@v2``, ``NAME@hash12``):
#: which one, if any, only the route can say (it knows the team).
TEAM_FAMILY = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,63}(@(v[0-9]{1,9}|[0-9a-f]{12}))?$")


def family_shape(family: Any, shape: dict[str, int]) -> dict[str, int]:
    """``shape`` checked against the family's dimensions and the GPU memory bound, in the
    family's order (``ValueError`` names the problem)."""
    dims = family.make_dims(shape)
    check_fits_gpu_memory(family, dims)
    return dims.as_dict()


def family_actions(family: Any, actions: list[str]) -> list[str]:
    """``actions`` as transform names of the family, sorted (``ValueError`` names the
    unknown ones)."""
    names = family.transforms.names()
    unknown = [v for v in actions if v not in names]
    if unknown:
        raise ValueError(f"unknown action(s) {', '.join(map(repr, unknown))}; known: "
                         f"{', '.join(names)}")
    return sorted(set(actions))


def _context_family(info: ValidationInfo) -> Any:
    """The family a caller resolved already (``model_validate(..., context={"family": f})``:
    the CLI's check of a user family)."""
    return (info.context or {}).get("family") if isinstance(info.context, dict) else None


def _family_of(info: ValidationInfo) -> Any:
    """The family of the body's ``kernel``: the context's, a built-in, or None (the kernel
    was refused, or is a team's own family, which the route resolves and checks)."""
    found = _context_family(info)
    if found is not None:
        return found
    kernel = info.data.get("kernel")
    return get_family(kernel) if kernel in family_names() else None


class BudgetModel(_In):
    """The campaign stops at the first budget hit."""

    iterations: int = Field(default=600, ge=1, le=100_000)
    wall_seconds: float | None = Field(default=None, gt=0, le=7 * 86400, allow_inf_nan=False)
    gpu_seconds: float | None = Field(default=None, gt=0, le=7 * 86400, allow_inf_nan=False)


class LeaderboardEntry(_In):
    """One entry of a leaderboard: a time or a throughput."""

    avg_us: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    #: in the family's unit (TFLOP/s or GB/s)
    throughput: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    #: TFLOP/s (a flops metric; the same as ``throughput`` there)
    tflops: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    name: str | None = Field(default=None, max_length=200, pattern=PRINTABLE)


class CampaignCreate(_In):
    """``POST /campaigns``."""

    kernel: str = Field(default_factory=lambda: get_settings().default_kernel,
                        pattern=PRINTABLE, description=(
                            "a built-in family's name, or one of the team's own (GET "
                            "/families): NAME (its latest version), NAME@vN or NAME@hash12"))
    shape: ShapeModel
    tolerance: float | None = Field(
        default=None, gt=0, le=0.1, allow_inf_nan=False,
        description="correctness tolerance; default: the one the family declares, else 1e-4")
    budget: BudgetModel = Field(default_factory=BudgetModel)
    policy: Literal["expert", "optuna", "random", "llm"] = "expert"
    accept_threshold_pct: float = Field(default=0.5, ge=0, le=100, allow_inf_nan=False)
    profile: Literal["full", "light"] = "light"
    parallel: int = Field(default=1, ge=1)
    seed: int = Field(default=0, ge=0, le=2**31 - 1)
    leaderboard: list[float | LeaderboardEntry] | None = Field(default=None, max_length=10_000)
    start_from: Literal["best"] | None = None
    #: check the best kernel with compute-sanitizer (memcheck, racecheck) once done
    sanitize: bool = False
    allowed_actions: list[ActionText] | None = Field(default=None, min_length=1, max_length=64)

    @field_validator("kernel")
    @classmethod
    def _known_kernel(cls, value: str, info: ValidationInfo) -> str:
        if _context_family(info) is not None or value in family_names():
            return value
        if not TEAM_FAMILY.match(value):
            raise ValueError(f"unknown kernel family {shown(value)}; known: "
                             f"{', '.join(family_names())}")
        return value  # a team's own family: found (for the team) by the route

    @field_validator("shape")
    @classmethod
    def _family_shape(cls, shape: dict[str, int], info: ValidationInfo) -> dict[str, int]:
        family = _family_of(info)
        if family is None:  # refused, or a team's family the route checks the shape against
            return shape
        return family_shape(family, shape)

    @field_validator("policy")
    @classmethod
    def _policy_usable(cls, value: str) -> str:
        assert value in POLICY_NAMES
        if value == "llm" and not get_settings().llm_url:
            raise ValueError("policy 'llm' needs the service to have TUNEFORGE_LLM_URL set")
        return value

    @field_validator("parallel")
    @classmethod
    def _parallel_bounded(cls, value: int) -> int:
        top = get_settings().max_parallel
        if value > top:
            raise ValueError(f"parallel must be at most {top} (TUNEFORGE_MAX_PARALLEL)")
        return value

    @field_validator("leaderboard")
    @classmethod
    def _leaderboard_finite(cls, value: list[Any] | None) -> list[Any] | None:
        for entry in value or []:
            if isinstance(entry, float) and (not math.isfinite(entry) or entry <= 0):
                raise ValueError("leaderboard times must be finite numbers > 0 (µs)")
            if isinstance(entry, LeaderboardEntry) and entry.avg_us is None \
                    and entry.tflops is None and entry.throughput is None:
                raise ValueError("a leaderboard entry needs avg_us, throughput or tflops")
        return value

    @field_validator("allowed_actions")
    @classmethod
    def _known_actions(cls, value: list[str] | None, info: ValidationInfo) -> list[str] | None:
        family = _family_of(info)
        if value is None or family is None:
            return value
        return family_actions(family, value)


class CampaignCreated(BaseModel):
    """``201`` answer of ``POST /campaigns``."""

    id: str
    status: CampaignStatus


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
    gpu_seconds: float
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
    401: "No X-API-Key header, or an unknown or revoked key",
    404: "No such campaign, candidate or kernel family among the caller's team's",
    409: "The campaign is finished: it takes no new actions, and one that is done or failed "
         "has nothing left to cancel; or a family takes a built-in family's name",
    413: "The body is larger than TUNEFORGE_MAX_BODY_BYTES",
}


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for the error codes an operation may answer."""
    return {code: {"model": ErrorRead, "description": ERROR_DESCRIPTIONS[code]}
            for code in codes}
