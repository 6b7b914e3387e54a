"""A campaign from its spec to its end: create, start (the baseline and a warm start), budgets,
finish, cancel, and the actions a user injects into a running campaign.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, load_only

from agent.engine.locking import CampaignError, emit, lock_campaign
from agent.policies.base import PolicyContext, key_of
from core.models import Campaign, Candidate, aware, new_id, utcnow
from core.settings import get_settings
from core.version import commit
from kernels import get_family
from kernels.base import Action, UnknownAction
from kernels.family import DEFAULT_TOLERANCE, source_digest

#: The ``settle_after`` of a campaign that gives none: evaluations without an accepted
#: improvement after which a campaign whose incumbent's neighbourhood is explored has settled and
#: ends (:func:`settled`). Longer than the longest stretch without an improvement that any
#: replay campaign went through before improving again (docs/BENCHMARKS.md, "Settled
#: campaigns"), so that none of them stops short of the best its whole budget finds.
SETTLE_AFTER = 300


@dataclass
class CampaignSpec:
    """A campaign's settings, resolved (``agent.campaigns.resolve``); the field defaults here
    are the one home of every setting's default."""

    #: the family's name (None: the settings' ``default_kernel``)
    kernel: str | None = None
    #: the problem's dimensions by the family's names (None: the family's ``default_dims``)
    dims: dict[str, int] | None = None
    tolerance: float = DEFAULT_TOLERANCE
    policy: str = "expert"
    accept_threshold_pct: float = 0.5
    profile: str = "light"
    parallel: int = 1
    seed: int = 0
    budget_iterations: int = 600
    #: end once settled (:func:`settled`) after this many evaluations without an accepted
    #: improvement; 0: run until a budget is spent
    settle_after: int = SETTLE_AFTER
    budget_wall_s: float | None = None
    budget_gpu_s: float | None = None
    leaderboard: list[Any] | None = None
    start_from: str | None = None
    allowed_actions: list[str] | None = None
    arch: str = "sm_90"
    team_id: str | None = None
    #: run the compute-sanitizer gate on the best kernel once the campaign is done
    sanitize: bool = False
    #: serve an evaluation the team made before from its history (False: measure afresh)
    reuse: bool = True
    extra: dict[str, Any] = field(default_factory=dict)


def new_candidate(session: Session, campaign: Campaign, family: Any, params: Any, *,
                   action: str | None, reason: str, proposed_by: str,
                   parent_id: str | None) -> Candidate:
    """The campaign's next candidate, for ``params`` (rendered unless the family refuses the
    point), with its ``proposed`` event."""
    params = params.canonical()
    rejection = family.validate(params, campaign.arch)
    source = family.render(params) if rejection is None else None
    cand = Candidate(
        id=new_id(),  # known now: the row is written with the transaction's other changes
        campaign_id=campaign.id, iteration=campaign.next_iteration, parent_id=parent_id,
        action=action, proposed_by=proposed_by, reason=reason, params=params.to_dict(),
        params_key=key_of(params), source=source,
        # the family's source_hash of the source just rendered (not rendered again)
        source_hash=source_digest(source) if source else None,
        status="pending",
    )
    campaign.next_iteration += 1
    session.add(cand)
    emit(session, campaign.id, "proposed", {
        "candidate_id": cand.id, "iteration": cand.iteration, "action": action,
        "reason": reason, "proposed_by": proposed_by, "params": cand.params,
    })
    return cand


def create_campaign(session: Session, spec: CampaignSpec, *, backend: str,
                    device: dict[str, Any] | None = None,
                    vendor_us: float | None = None) -> Campaign:
    """Insert a queued campaign after checking the spec against the family."""
    try:
        family = get_family(spec.kernel or get_settings().default_kernel)
        dims = (family.make_dims(spec.dims) if spec.dims is not None
                else family.default_dims)
        family.max_smem_limit(spec.arch)
    except ValueError as exc:
        raise CampaignError(str(exc)) from None
    if spec.allowed_actions is not None:
        for name in spec.allowed_actions:
            if name not in family.transforms:
                raise CampaignError(f"allowed_actions: unknown action {name!r}")
    if spec.sanitize and backend != "gpu":
        raise CampaignError(f"sanitize: the compute-sanitizer gate runs kernels on a GPU; this "
                            f"campaign's backend is {backend}")
    campaign = Campaign(
        team_id=spec.team_id, kernel=family.name, dims=dims.as_dict(), arch=spec.arch,
        backend=backend, gpu_name=(device or {}).get("name"), device=device,
        tolerance=spec.tolerance, policy=spec.policy,
        accept_threshold_pct=spec.accept_threshold_pct, profile=spec.profile,
        parallel=spec.parallel, seed=spec.seed, budget_iterations=spec.budget_iterations,
        settle_after=spec.settle_after,
        budget_wall_s=spec.budget_wall_s, budget_gpu_s=spec.budget_gpu_s,
        leaderboard=spec.leaderboard, start_from=spec.start_from,
        allowed_actions=spec.allowed_actions, injected_actions=[], vendor_us=vendor_us,
        sanitize=spec.sanitize, reuse=spec.reuse, commit=commit(), status="queued",
    )
    session.add(campaign)
    session.flush()
    emit(session, campaign.id, "created", {"kernel": family.name, "shape": campaign.shape_text,
                                           "policy": spec.policy, "backend": backend})
    return campaign


def warm_start_params(session: Session, campaign: Campaign) -> tuple[dict[str, Any], str] | None:
    """The best earlier result for the same kernel, GPU and team at the nearest shape."""
    rows = session.execute(
        select(Candidate, Campaign).join(Campaign, Candidate.campaign_id == Campaign.id)
        .options(load_only(Candidate.id, Candidate.params, Candidate.avg_us),
                 load_only(Campaign.id, Campaign.kernel, Campaign.dims))  # no JSON record
        .where(
            Campaign.kernel == campaign.kernel, Campaign.id != campaign.id,
            Campaign.gpu_name == campaign.gpu_name, Campaign.team_id == campaign.team_id
            if campaign.team_id is not None else Campaign.team_id.is_(None),
            Candidate.status == "ok", Candidate.accepted.is_(True),
        )
    ).all()
    if not rows:
        return None

    def distance(camp: Campaign) -> float:
        if set(camp.dims) != set(campaign.dims):
            return math.inf
        return sum(abs(math.log(camp.dims[name] / value))
                   for name, value in campaign.dims.items())

    cand, camp = min(rows, key=lambda r: (distance(r[1]), r[0].avg_us or math.inf))
    return cand.params, f"warm start: best of campaign {camp.id[:8]} at {camp.shape_text}"


def start_campaign(session: Session, campaign_id: str,
                   seeds: Sequence[tuple[Any, str]] = ()) -> list[Candidate]:
    """Running: the seed's baseline first (and the team's best earlier point if asked), then
    ``seeds``, points given with why (a shape set's transferred bests), each once."""
    campaign = lock_campaign(session, campaign_id)
    if campaign.status != "queued":
        return []
    family = get_family(campaign.kernel)
    campaign.status = "running"
    campaign.started_at = utcnow()
    emit(session, campaign.id, "started", {})
    created = [new_candidate(session, campaign, family, family.baseline, action=None,
                              reason="the seed's baseline", proposed_by="baseline",
                              parent_id=None)]
    if campaign.start_from == "best":
        found = warm_start_params(session, campaign)
        if found is None:
            emit(session, campaign.id, "note", {"kind": "warm_start", "message":
                                                "no earlier result for this kernel and GPU"})
        else:
            # a kernel specialized for the other campaign's shape starts here unspecialized
            params = family.for_shape(family.params_from_dict(found[0]), campaign.problem)
            if key_of(params) != created[0].params_key:
                created.append(new_candidate(session, campaign, family, params,
                                              action="warm_start()", reason=found[1],
                                              proposed_by="warm_start",
                                              parent_id=created[0].id))
    source = "library" if campaign.start_from == "library" else "transfer"
    for params, reason in seeds:
        if key_of(params) in {c.params_key for c in created}:
            continue
        created.append(new_candidate(session, campaign, family, params, action=f"{source}()",
                                      reason=reason, proposed_by=source,
                                      parent_id=created[0].id))
    return created


def budget_left(campaign: Campaign) -> tuple[int, str | None]:
    """Evaluations that may still be proposed, and the budget that is spent (if any)."""
    if campaign.budget_wall_s is not None and campaign.started_at is not None:
        started = aware(campaign.started_at)
        assert started is not None
        if (utcnow() - started).total_seconds() >= campaign.budget_wall_s:
            return 0, f"wall-clock budget of {campaign.budget_wall_s:g} s spent"
    if campaign.budget_gpu_s is not None and campaign.gpu_seconds >= campaign.budget_gpu_s:
        return 0, f"GPU budget of {campaign.budget_gpu_s:g} s spent"
    left = campaign.budget_iterations - campaign.next_iteration
    if left <= 0:
        return 0, f"iteration budget of {campaign.budget_iterations} spent"
    return left, None


def settled(campaign: Campaign, ctx: PolicyContext) -> str | None:
    """Why the running campaign has settled, or None. It has when all of these hold: its last
    ``settle_after`` evaluations (its ``stagnation``, in flight ones not counted) brought no
    accepted improvement, no injected action waits, and every point one transform from the
    incumbent that its space and allowed actions hold has been evaluated or is in flight
    (``PolicyContext.neighbours``): nothing near the best is left to try, and the search has
    gone that long without finding better farther out. ``settle_after`` 0: never."""
    window = campaign.settle_after
    if not window or ctx.stagnation < window or campaign.injected_actions:
        return None
    if next(ctx.neighbours(), None) is not None:
        return None
    inc = ctx.incumbent
    assert inc is not None
    return (f"settled: the last {ctx.stagnation} evaluations found nothing better than "
            f"#{inc.iteration}, and every point one transform from it was tried (settle_after "
            f"{window}; {campaign.next_iteration} of a budget of {campaign.budget_iterations} "
            "evaluations)")


def finish_campaign(session: Session, campaign: Campaign, status: str, reason: str) -> None:
    """End the campaign (done, failed or cancelled) with its reason."""
    if campaign.status in ("done", "failed", "cancelled"):
        return
    campaign.status = status
    campaign.status_reason = reason
    campaign.finished_at = utcnow()
    emit(session, campaign.id, "finished", {"status": status, "reason": reason,
                                            "best_id": campaign.best_id,
                                            "best_us": campaign.best_us,
                                            "evaluations": campaign.evaluations})


def cancel_campaign(session: Session, campaign_id: str) -> Campaign:
    """Stop proposing; in-flight candidates are recorded as they finish."""
    campaign = lock_campaign(session, campaign_id)
    finish_campaign(session, campaign, "cancelled", "cancelled by a user")
    return campaign


def inject_actions(session: Session, campaign_id: str, actions: list[str]) -> Campaign:
    """Give a running campaign new actions (the seed's human adding register blocking)."""
    campaign = lock_campaign(session, campaign_id)
    family = get_family(campaign.kernel)
    parsed = []
    for text in actions:
        try:
            action = Action.parse(text)
            family.transforms.check(action)
        except (ValueError, UnknownAction) as exc:
            raise CampaignError(f"actions: {exc}") from None
        parsed.append(action)
    if campaign.status in ("done", "failed", "cancelled"):
        raise CampaignError(f"campaign is {campaign.status}: it takes no new actions")
    if campaign.allowed_actions is not None:
        campaign.allowed_actions = sorted({*campaign.allowed_actions,
                                           *(a.name for a in parsed)})
    campaign.injected_actions = [*campaign.injected_actions, *(str(a) for a in parsed)]
    emit(session, campaign.id, "injected", {"actions": [str(a) for a in parsed]})
    return campaign
