"""Creating a campaign: the request a kernel engineer submits (the body of ``POST /campaigns``,
and what ``tuneforge tune`` checks its options against), and the one door where every setting
of a campaign is resolved, :func:`open_campaign`, which the API route and the CLI both call.

A setting left out of a request takes its default from one place: the field's default in
:class:`agent.engine.lifecycle.CampaignSpec`, except the tolerance, which is the family's
(:func:`kernels.family.campaign_tolerance`: the one its spec declares, else
:data:`kernels.family.DEFAULT_TOLERANCE`), and ``parallel`` (candidates in flight), which is
the delivery's: :data:`SERVICE_PARALLEL` on the service, the local evaluators' capacity in
embedded mode. Once created, a campaign's row holds every setting resolved: workers and the
driver read them from there, never from their own defaults.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError
from sqlalchemy.orm import Session

from agent.engine.lifecycle import CampaignSpec, create_campaign
from agent.policies import POLICY_NAMES
from core.models import Campaign
from core.settings import get_settings
from kernels import family_names, get_family
from kernels.family import DEFAULT_TOLERANCE, campaign_tolerance

#: The defaults of every setting a request may leave out.
DEFAULTS = CampaignSpec()
#: Candidates a service campaign keeps in flight unless it asks for more (the GPUs are shared
#: fairly between campaigns in proportion to it).
SERVICE_PARALLEL = 1

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
    """The campaign stops at the first budget hit, or before, once it has settled."""

    iterations: int | None = Field(default=None, ge=1, le=100_000,
                                   description=f"default: {DEFAULTS.budget_iterations}")
    wall_seconds: float | None = Field(default=None, gt=0, le=7 * 86400, allow_inf_nan=False)
    gpu_seconds: float | None = Field(default=None, gt=0, le=7 * 86400, allow_inf_nan=False)
    settle_after: int | None = Field(
        default=None, ge=0, le=100_000,
        description="end the campaign before its budgets once it has settled: no accepted "
                    "improvement over this many evaluations, and every point one transform "
                    "from its best evaluated; 0: never (the budgets alone end it); default: "
                    f"{DEFAULTS.settle_after}")


class LeaderboardEntry(_In):
    """One entry of a leaderboard: a time or a throughput."""

    avg_us: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    #: in the family's unit (TFLOP/s or GB/s)
    throughput: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    #: TFLOP/s (a flops metric; the same as ``throughput`` there)
    tflops: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    name: str | None = Field(default=None, max_length=200, pattern=PRINTABLE)


class ShapeEntry(_In):
    """One shape of a shape set, and how much it matters (how often the program runs it)."""

    shape: ShapeModel
    weight: float = Field(default=1.0, gt=0, le=1e9, allow_inf_nan=False)


class CampaignCreate(_In):
    """``POST /campaigns``: one shape (``shape``), or a shape set (``shapes``) tuned as one job
    under one budget (``agent/shapesets.py``)."""

    #: whole bodies, as the API reference shows them and as the API fuzz test sends them
    model_config = ConfigDict(json_schema_extra={"examples": [
        {"kernel": "gemm_bias_relu", "shape": {"m": 4096, "n": 4096, "k": 4096},
         "budget": {"iterations": 3}},
        {"kernel": "gemm_bias_relu",
         "shapes": [{"shape": {"m": 4096, "n": 4096, "k": 4096}, "weight": 3},
                    {"shape": {"m": 8192, "n": 1024, "k": 4096}}],
         "budget": {"iterations": 8}}]})

    kernel: str = Field(default_factory=lambda: get_settings().default_kernel,
                        pattern=PRINTABLE, description=(
                            "a built-in family's name, or one of the team's own (GET "
                            "/families): NAME (its latest version), NAME@vN or NAME@hash12"))
    shapes: list[ShapeEntry] | None = Field(
        default=None, min_length=1, max_length=64, description=(
            "a shape set: the shapes a program runs, each with its weight; tuned one after "
            "another under the one budget, each starting from what the others found"))
    #: required unless ``shapes`` (checked after it: the field order is the check's order)
    shape: ShapeModel | None = Field(default=None, validate_default=True)
    tolerance: float | None = Field(
        default=None, gt=0, le=0.1, allow_inf_nan=False,
        description="correctness tolerance; default: the one the family declares, else "
                    f"{DEFAULT_TOLERANCE:g}")
    budget: BudgetModel = Field(default_factory=BudgetModel)
    policy: Literal["expert", "optuna", "random", "llm"] | None = Field(
        default=None, description=f"default: {DEFAULTS.policy}")
    accept_threshold_pct: float | None = Field(
        default=None, ge=0, le=100, allow_inf_nan=False,
        description=f"accept a candidate above this % improvement; default: "
                    f"{DEFAULTS.accept_threshold_pct:g}")
    profile: Literal["full", "light"] | None = Field(
        default=None, description=f"default: {DEFAULTS.profile}")
    parallel: int | None = Field(
        default=None, ge=1, description="candidates in flight at once; default: "
                                        f"{SERVICE_PARALLEL} on the service")
    seed: int | None = Field(default=None, ge=0, le=2**31 - 1,
                             description=f"default: {DEFAULTS.seed}")
    leaderboard: list[float | LeaderboardEntry] | None = Field(default=None, max_length=10_000)
    start_from: Literal["best", "library"] | None = Field(default=None, description=(
        "best: start from the team's best point at the nearest shape; library: from the "
        "library's fallback points at this shape (a probe of what the library would run "
        "here)"))
    #: check the best kernel with compute-sanitizer (memcheck, racecheck) once done
    sanitize: bool | None = Field(default=None, description=f"default: {DEFAULTS.sanitize}")
    fresh: bool | None = Field(default=None, description=(
        "measure every candidate, even one whose evaluation the team's history holds (by "
        "default such an evaluation is served from the history: no GPU time)"))
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
    def _family_shape(cls, shape: dict[str, int] | None, info: ValidationInfo
                      ) -> dict[str, int] | None:
        if shape is None and "shapes" in info.data and info.data["shapes"] is None:
            raise PydanticCustomError(
                "missing", "Field required: shape (one shape), or shapes (a shape set)")
        family = _family_of(info)
        if family is None or shape is None:  # refused, or a team's family (the route checks)
            return shape
        return family_shape(family, shape)

    @field_validator("shapes")
    @classmethod
    def _family_shapes(cls, shapes: list[ShapeEntry] | None, info: ValidationInfo
                       ) -> list[ShapeEntry] | None:
        family = _family_of(info)
        if family is None or shapes is None:
            return shapes
        for i, entry in enumerate(shapes):
            try:
                entry.shape = family_shape(family, entry.shape)
            except ValueError as exc:
                raise ValueError(f"shapes[{i}]: {exc}") from None
        return shapes

    @model_validator(mode="after")
    def _one_shape_or_a_set(self) -> CampaignCreate:
        if self.shape is not None and self.shapes is not None:
            raise ValueError("give either shape (one shape) or shapes (a shape set), not both")
        return self

    @field_validator("policy")
    @classmethod
    def _policy_usable(cls, value: str | None) -> str | None:
        assert value is None or value in POLICY_NAMES
        if value == "llm" and not get_settings().llm_url:
            raise ValueError("policy 'llm' needs the service to have TUNEFORGE_LLM_URL set")
        return value

    @field_validator("parallel")
    @classmethod
    def _parallel_bounded(cls, value: int | None) -> int | None:
        top = get_settings().max_parallel
        if value is not None and value > top:
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


def resolve(request: CampaignCreate, *, family: Any, arch: str, team_id: str | None,
            default_parallel: int) -> CampaignSpec:
    """Every setting of the campaign ``request`` asks for, the defaults filled in
    (``ValueError`` starting with the field's name when the family refuses one)."""
    if request.shape is None:
        raise ValueError("shape: a shape set is opened by agent.shapesets.open_set")
    try:
        dims = family_shape(family, request.shape)
    except ValueError as exc:
        raise ValueError(f"shape: {exc}") from None
    allowed = request.allowed_actions
    if allowed is not None:
        try:
            allowed = family_actions(family, allowed)
        except ValueError as exc:
            raise ValueError(f"allowed_actions: {exc}") from None
    leaderboard = None
    if request.leaderboard is not None:
        leaderboard = [e if isinstance(e, float) else e.model_dump(exclude_none=True)
                       for e in request.leaderboard]
    given: dict[str, Any] = {
        "policy": request.policy, "accept_threshold_pct": request.accept_threshold_pct,
        "profile": request.profile, "seed": request.seed, "sanitize": request.sanitize,
        "budget_iterations": request.budget.iterations,
        "settle_after": request.budget.settle_after,
    }
    return CampaignSpec(
        kernel=family.name, dims=dims, tolerance=campaign_tolerance(family, request.tolerance),
        parallel=request.parallel if request.parallel is not None else default_parallel,
        budget_wall_s=request.budget.wall_seconds, budget_gpu_s=request.budget.gpu_seconds,
        leaderboard=leaderboard, start_from=request.start_from, allowed_actions=allowed,
        arch=arch, team_id=team_id, reuse=not request.fresh,
        **{k: v for k, v in given.items() if v is not None})


def open_campaign(session: Session, request: CampaignCreate, *, family: Any, arch: str,
                  team_id: str | None, backend: str, default_parallel: int = SERVICE_PARALLEL,
                  device: dict[str, Any] | None = None,
                  vendor_us: float | None = None) -> Campaign:
    """Resolve every setting of ``request`` for ``family`` and insert the queued campaign (the
    API's ``POST /campaigns`` and ``tuneforge tune``); ``CampaignError`` (a ``ValueError``)
    whose message starts with the refused field's name."""
    from agent.engine.locking import CampaignError

    try:
        spec = resolve(request, family=family, arch=arch, team_id=team_id,
                       default_parallel=default_parallel)
    except ValueError as exc:
        raise CampaignError(str(exc)) from None
    return create_campaign(session, spec, backend=backend, device=device, vendor_us=vendor_us)
