"""Shape sets: the shapes a program runs, tuned as one job under one budget.

A set is a row of ``shape_sets`` and one member campaign a shape, created together and queued.
Members run one after another, the heaviest first (among equal weights, in the order given),
each an ordinary campaign of the set's settings (every policy, every report, the dashboard and
the event stream work on it), so that each starts from what the ones before it found:

- **Budget.** The set's evaluations are shared as each member starts: what is left of the
  set's budget (its budget less what the finished members used), in proportion to the
  member's weight among the members not started, and at least :data:`MIN_MEMBER_EVALUATIONS`.
  A member that ends early (its search settled or exhausted) leaves its share to the others.
- **Transfer.** After the seed's baseline, a member first measures the bests of the
  :data:`TRANSFER_NEIGHBOURS` nearest shapes the set tuned before it, each made a starting
  point for its shape
  (``family.for_shape``): a point invalid there is dropped, and every one is checked for
  correctness there like any candidate.
- **Context.** The policy of a member sees the outcomes at the other shapes
  (:class:`agent.policies.base.ShapeOutcome`): their bests and what each transform paid there.

**Nearest** is measured on the shapes' dimensions in log space: the distance between two
shapes of a family is the sum over its dimensions of ``|ln(a / b)|`` (8192x4096 is ln 2 from
8192x8192 and from 4096x4096 alike; a shape twice as large in every dimension is ``d ln 2``
away), so ratios count, not differences.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from agent.campaigns import DEFAULTS, CampaignCreate, open_campaign
from agent.policies.base import ShapeOutcome
from core.models import Campaign, Candidate, ShapeSet, aware, utcnow
from core.statuses import CANDIDATE_FINAL
from kernels import get_family

#: Evaluations a member gets at least: the baseline and the points transferred to it.
MIN_MEMBER_EVALUATIONS = 4
#: Tuned shapes whose bests a member starts from (the nearest first).
TRANSFER_NEIGHBOURS = 3
#: Shapes a set may have.
MAX_SET_SHAPES = 64
_FINISHED = ("done", "failed", "cancelled")


def shape_distance(a: dict[str, int], b: dict[str, int]) -> float:
    """The distance between two shapes of one family: ``sum |ln(a_d / b_d)|`` over its
    dimensions (infinite when they do not have the same dimensions)."""
    if set(a) != set(b):
        return math.inf
    return sum(abs(math.log(a[name] / b[name])) for name in a)


@dataclass(frozen=True)
class TunedShape:
    """The best point found at one shape: where it comes from and how fast it ran."""

    dims: dict[str, int]
    params: dict[str, Any]
    avg_us: float
    campaign_id: str
    iteration: int

    def text(self, family: Any) -> str:
        """The shape as the family writes it."""
        return str(family.make_dims(self.dims))


# ---- creating a set --------------------------------------------------------------------------
def member_order(request: CampaignCreate) -> list[tuple[dict[str, int], float]]:
    """The members' shapes and weights in the order they run: heaviest first, then as given."""
    assert request.shapes is not None
    entries = [(dict(e.shape), float(e.weight)) for e in request.shapes]
    return [entries[i] for i in sorted(range(len(entries)), key=lambda i: (-entries[i][1], i))]


def open_set(session: Session, request: CampaignCreate, *, family: Any, arch: str,
             team_id: str | None, backend: str, default_parallel: int,
             device: dict[str, Any] | None = None,
             vendor_us: Any = None) -> ShapeSet:
    """Check a set's request for ``family`` and insert the set and its queued members (one
    campaign a shape, through :func:`agent.campaigns.open_campaign`); ``CampaignError`` whose
    message starts with the refused field. ``vendor_us``: a function of a member's dims
    giving the vendor's time there, when the caller can measure it."""
    from agent.engine.locking import CampaignError

    order = member_order(request)
    texts = [str(family.make_dims(dims)) for dims, _w in order]
    if len(set(texts)) != len(texts):
        twice = sorted({t for t in texts if texts.count(t) > 1})
        raise CampaignError(f"shapes: {', '.join(twice)} given more than once")
    budget = request.budget.iterations or DEFAULTS.budget_iterations
    if budget < MIN_MEMBER_EVALUATIONS * len(order):
        raise CampaignError(
            f"budget: a set of {len(order)} shapes needs at least "
            f"{MIN_MEMBER_EVALUATIONS * len(order)} evaluations ({MIN_MEMBER_EVALUATIONS} a "
            f"shape: its baseline and the points transferred from the others), got {budget}")
    shape_set = ShapeSet(team_id=team_id, kernel=family.name, status="queued",
                         budget_iterations=budget)
    session.add(shape_set)
    session.flush()
    for index, (dims, weight) in enumerate(order):
        member = request.model_copy(update={"shape": dims, "shapes": None})
        campaign = open_campaign(
            session, member, family=family, arch=arch, team_id=team_id, backend=backend,
            default_parallel=default_parallel, device=device,
            vendor_us=vendor_us(family.make_dims(dims)) if vendor_us is not None else None)
        campaign.set_id, campaign.set_index, campaign.weight = shape_set.id, index, weight
        campaign.budget_iterations = MIN_MEMBER_EVALUATIONS  # its share is set as it starts
    session.flush()
    return shape_set


# ---- running a set -------------------------------------------------------------------------
def members(session: Session, set_id: str) -> list[Campaign]:
    """The set's campaigns in the order they run."""
    return list(session.scalars(select(Campaign).where(Campaign.set_id == set_id)
                                .order_by(Campaign.set_index)))


def its_turn(session: Session, campaign: Campaign) -> bool:
    """Whether a member may start: every member before it has finished (a campaign of no
    set always may)."""
    if campaign.set_id is None:
        return True
    waiting = session.scalar(select(func.count()).select_from(Campaign).where(
        Campaign.set_id == campaign.set_id, Campaign.set_index < (campaign.set_index or 0),
        Campaign.status.not_in(_FINISHED)))
    return not waiting


def before_start(session: Session, campaign: Campaign) -> None:
    """Give a member its share of what is left of each of the set's budgets; mark the set
    running.

    Evaluations, wall seconds and GPU seconds are shared alike: what the set has left (its
    budget less what the finished members used, or the time since the set started), in
    proportion to the member's weight among the members not started. Until it starts, a
    member's wall and GPU budgets hold the set's whole ones (:func:`open_set` gives every
    member the request's)."""
    if campaign.set_id is None:
        return
    shape_set = session.get(ShapeSet, campaign.set_id, with_for_update=True)
    assert shape_set is not None
    if shape_set.status == "queued":
        shape_set.status, shape_set.started_at = "running", utcnow()
    rows = members(session, campaign.set_id)
    finished = [m for m in rows if m.status in _FINISHED]
    later = [m for m in rows if m.status == "queued" and m.id != campaign.id]
    weights = campaign.weight + sum(m.weight for m in later)
    part = campaign.weight / weights if weights > 0 else 1.0
    used = sum(m.evaluations for m in finished)
    left = shape_set.budget_iterations - used - MIN_MEMBER_EVALUATIONS * len(later)
    campaign.budget_iterations = max(MIN_MEMBER_EVALUATIONS, min(int(left * part), left))
    if campaign.budget_wall_s is not None:
        started = aware(shape_set.started_at)
        assert started is not None  # set above, when the first member starts
        spent = (utcnow() - started).total_seconds()
        campaign.budget_wall_s = round(max(0.0, campaign.budget_wall_s - spent) * part, 2)
    if campaign.budget_gpu_s is not None:
        spent = sum(m.gpu_seconds for m in finished)
        campaign.budget_gpu_s = round(max(0.0, campaign.budget_gpu_s - spent) * part, 3)


def advance(session: Session, campaign: Campaign) -> str | None:
    """After a member has finished: the next member to start, or None (the set is then
    finished, when every member is)."""
    if campaign.set_id is None or campaign.status not in _FINISHED:
        return None
    rows = members(session, campaign.set_id)
    queued = [m for m in rows if m.status == "queued"]
    if queued:
        return queued[0].id
    if all(m.status in _FINISHED for m in rows):
        shape_set = session.get(ShapeSet, campaign.set_id, with_for_update=True)
        assert shape_set is not None
        if shape_set.finished_at is None:
            failed = [m for m in rows if m.status == "failed"]
            shape_set.status = "done" if len(failed) < len(rows) else "failed"
            shape_set.status_reason = (f"{len(rows) - len(failed)} of {len(rows)} shapes tuned"
                                       + (f"; {len(failed)} failed" if failed else ""))
            shape_set.finished_at = utcnow()
    return None


def cancel(session: Session, set_id: str) -> None:
    """Cancel every member not finished yet (a running one keeps what it has measured)."""
    from agent.engine.lifecycle import cancel_campaign

    for member in members(session, set_id):
        if member.status not in _FINISHED:
            cancel_campaign(session, member.id)
    shape_set = session.get(ShapeSet, set_id, with_for_update=True)
    if shape_set is not None and shape_set.finished_at is None:
        shape_set.status, shape_set.status_reason = "cancelled", "cancelled by a user"
        shape_set.finished_at = utcnow()


# ---- what a member starts from ----------------------------------------------------------------
def tuned_shapes(session: Session, campaign: Campaign) -> list[TunedShape]:
    """The best point at every other shape of the campaign's set tuned so far (the fastest
    correct candidate of each), nearest first. Only the set's own members: a set submitted
    again then starts each shape from the same points, and is served whole from history."""
    rows = session.execute(
        select(Campaign.dims, Candidate.params, Candidate.avg_us, Candidate.campaign_id,
               Candidate.iteration)
        .join(Campaign, Campaign.id == Candidate.campaign_id)
        .where(Campaign.set_id == campaign.set_id, Campaign.id != campaign.id,
               Candidate.status == "ok", Candidate.avg_us.is_not(None))).all()
    best: dict[str, TunedShape] = {}
    here = dict(campaign.dims)
    for dims, params, avg_us, cid, iteration in rows:
        if dict(dims) == here:
            continue
        key = repr(sorted(dict(dims).items()))
        if key not in best or avg_us < best[key].avg_us:
            best[key] = TunedShape(dict(dims), dict(params), float(avg_us), cid, iteration)
    return sorted(best.values(), key=lambda t: (shape_distance(here, t.dims), t.avg_us))


def transfer_seeds(session: Session, campaign: Campaign,
                   k: int = TRANSFER_NEIGHBOURS) -> list[tuple[Any, str]]:
    """The points a set member starts from after its baseline: the bests of the ``k``
    nearest tuned shapes, each a starting point for this shape and valid here, with why."""
    family = get_family(campaign.kernel)
    dims = campaign.problem
    out: list[tuple[Any, str]] = []
    keys: set[str] = set()
    for tuned in tuned_shapes(session, campaign)[:k]:
        params = family.for_shape(family.params_from_dict(tuned.params), dims)
        if family.validate(params, campaign.arch) is not None:
            continue
        key = repr(sorted(params.canonical().to_dict().items()))
        if key in keys:
            continue
        keys.add(key)
        far = shape_distance(dict(campaign.dims), tuned.dims)
        out.append((params, f"transfer: the best at {tuned.text(family)} ({tuned.avg_us:.1f} "
                            f"µs there; distance {far:.2f}), campaign "
                            f"{tuned.campaign_id[:8]} #{tuned.iteration}"))
    return out


_PAYOFFS = (select(Candidate.campaign_id, Candidate.action, Candidate.decision)
            .where(Candidate.status.in_(CANDIDATE_FINAL), Candidate.action.is_not(None)))


#: (campaign, finished members) -> what :func:`other_shapes` found (a finished member's
#: outcome never changes); the oldest entries go beyond 256
_OUTCOMES: OrderedDict[tuple[str, tuple[str, ...]], tuple[ShapeOutcome, ...]] = OrderedDict()


def other_shapes(session: Session, campaign: Campaign) -> tuple[ShapeOutcome, ...]:
    """The outcomes at the set's other shapes that a member's policy reads: each finished
    member's best and the mean share of time each transform saved there, nearest first."""
    if campaign.set_id is None:
        return ()
    finished = tuple(mid for mid, status, best in session.execute(
        select(Campaign.id, Campaign.status, Campaign.best_id)
        .where(Campaign.set_id == campaign.set_id).order_by(Campaign.set_index))
        if mid != campaign.id and status in _FINISHED and best)
    if not finished:
        return ()
    key = (campaign.id, finished)
    found = _OUTCOMES.get(key)
    if found is None:  # the members themselves are read only when one has finished since
        done = [m for m in members(session, campaign.set_id) if m.id in finished]
        found = _OUTCOMES[key] = _outcomes(session, campaign, done)
        while len(_OUTCOMES) > 256:
            _OUTCOMES.popitem(last=False)
    return found


def _outcomes(session: Session, campaign: Campaign, done: list[Campaign]
              ) -> tuple[ShapeOutcome, ...]:
    family = get_family(campaign.kernel)
    gains: dict[str, dict[str, list[float]]] = {m.id: {} for m in done}
    for cid, action, decision in session.execute(
            _PAYOFFS.where(Candidate.campaign_id.in_([m.id for m in done]))):
        pct = (decision or {}).get("improvement_pct")
        if pct is None:
            continue
        name = str(action).split("(")[0]
        gains[cid].setdefault(name, []).append(max(min(float(pct), 50.0), -50.0))
    here = dict(campaign.dims)
    out = []
    for m in done:
        best = session.get(Candidate, m.best_id)
        assert best is not None
        out.append(ShapeOutcome(
            shape=m.shape_text, distance=shape_distance(here, dict(m.dims)),
            best_params=family.params_from_dict(best.params), best_us=float(best.avg_us or 0),
            payoffs={name: sum(v) / len(v) for name, v in gains[m.id].items()}))
    return tuple(sorted(out, key=lambda n: n.distance))


# ---- the set's result ------------------------------------------------------------------------
def result(session: Session, shape_set: ShapeSet) -> dict[str, Any]:
    """The set as one table: per shape, the best point, its time, x the vendor and % of the
    peak, with the evaluations, GPU-seconds and evaluations served from history."""
    from agent.exports import campaign_peak
    from agent.report import served_count

    family = get_family(shape_set.kernel)
    rows: list[dict[str, Any]] = []
    for m in members(session, shape_set.id):
        best = session.get(Candidate, m.best_id) if m.best_id else None
        rate = m.throughput(best.avg_us) if best is not None and best.avg_us else None
        peak = campaign_peak(m)
        rows.append({
            "campaign_id": m.id, "shape": m.shape_text, "weight": m.weight,
            "status": m.status, "reason": m.status_reason, "evaluations": m.evaluations,
            "budget": m.budget_iterations, "gpu_seconds": round(m.gpu_seconds, 3),
            "served_from_history": served_count(session, m.id),
            "best": None if best is None else {
                "candidate_id": best.id, "iteration": best.iteration, "params": best.params,
                "avg_us": best.avg_us, "throughput": round(rate, 3) if rate else None,
                "action": best.action},
            "vendor_us": m.vendor_us,
            "x_vendor": round(m.vendor_us / best.avg_us, 3)
            if best is not None and best.avg_us and m.vendor_us else None,
            "pct_of_peak": round(100 * rate / peak, 1) if rate and peak else None,
        })
    return {
        "set_id": shape_set.id, "kernel": shape_set.kernel, "unit": family.metric.unit,
        "status": shape_set.status, "reason": shape_set.status_reason,
        "budget": shape_set.budget_iterations,
        "evaluations": sum(r["evaluations"] for r in rows),
        "gpu_seconds": round(sum(r["gpu_seconds"] for r in rows), 3),
        "served_from_history": sum(r["served_from_history"] for r in rows),
        "wall_seconds": round((shape_set.finished_at - shape_set.started_at).total_seconds(), 2)
        if shape_set.finished_at and shape_set.started_at else None,
        "shapes": rows,
    }
