"""The campaign state machine over database rows; transport-agnostic.

Embedded mode (:mod:`agent.embedded`) and the Celery tasks call the same functions:

- :func:`create_campaign`, :func:`start_campaign` — rows for the campaign and its baseline;
- :func:`propose_candidates` — asks the policy for the next points (campaign row locked, so two
  results arriving together never produce a double step);
- :func:`record_compile`, :func:`record_measurement` — idempotent result writes, then the
  decision (accept above the threshold with confidence, otherwise revert to the incumbent),
  budgets, and the end of the campaign.

Every decision and its reason is stored with the candidate and as an event, so the decision
chain can be read back and replayed.

A process keeps the decoded history of the campaigns it decides for (:class:`HistoryCache`):
a decision reads only the candidates that may have changed since its last read, not the whole
campaign, and decides exactly as it would from a full read (:func:`history`).
"""

from __future__ import annotations

import datetime as dt
import math
import statistics
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import bindparam, event, func, or_, select
from sqlalchemy.orm import Session, SessionTransaction, defer, load_only
from sqlalchemy.orm.util import identity_key

from agent.policies.base import (
    HistoryItem,
    Policy,
    PolicyContext,
    Proposal,
    SearchSpace,
    key_of,
)
from core import feed
from core.candidates import compile_columns
from core.feedback import FeedbackRecord
from core.models import (
    Campaign,
    Candidate,
    Event,
    new_id,
    utcnow,
)
from core.settings import get_settings
from core.statuses import CANDIDATE_FINAL, CANDIDATE_IN_FLIGHT
from kernels import get_family
from kernels.base import Action, UnknownAction
from worker.compile import CompileResult
from worker.evaluate import Measurement


class CampaignError(ValueError):
    """A request the campaign cannot take (names the problem)."""


@dataclass
class CampaignSpec:
    """What a kernel engineer submits."""

    #: the family's name (None: the settings' ``default_kernel``)
    kernel: str | None = None
    #: the problem's dimensions by the family's names (None: the family's ``default_dims``)
    dims: dict[str, int] | None = None
    tolerance: float = 1e-4
    policy: str = "expert"
    accept_threshold_pct: float = 0.5
    profile: str = "light"
    parallel: int = 1
    seed: int = 0
    budget_iterations: int = 600
    budget_wall_s: float | None = None
    budget_gpu_s: float | None = None
    leaderboard: list[Any] | None = None
    start_from: str | None = None
    allowed_actions: list[str] | None = None
    arch: str = "sm_90"
    team_id: str | None = None
    #: run the compute-sanitizer gate on the best kernel once the campaign is done
    sanitize: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


# ---- helpers --------------------------------------------------------------------------------
def emit(session: Session, campaign_id: str, kind: str, payload: dict[str, Any]) -> None:
    """Append an event (SSE stream, audit log) with the campaign's next number. The caller
    holds the campaign's row lock (or created the campaign), so the campaign is in the
    session and its numbers follow the order in which the transactions commit."""
    campaign = session.get(Campaign, campaign_id)
    if campaign is None:
        raise CampaignError(f"no campaign {campaign_id}")
    campaign.event_seq = (campaign.event_seq or 0) + 1
    ev = Event(campaign_id=campaign_id, seq=campaign.event_seq, kind=kind, payload=payload)
    session.add(ev)
    feed.written(session, ev)


def _aware(value: dt.datetime | None) -> dt.datetime | None:
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=dt.UTC)
    return value


def rank_estimate(leaderboard: list[Any] | None, best_us: float | None,
                  best_rate: float | None) -> int | None:
    """Rank the best kernel would take in ``leaderboard``: entries in µs, or dicts with
    ``avg_us``/``us``, or a ``throughput`` in the family's unit (``tflops`` for a flops
    metric) compared with ``best_rate``."""
    if not leaderboard or best_us is None:
        return None
    faster = 0
    for entry in leaderboard:
        if isinstance(entry, dict):
            rate = entry.get("throughput", entry.get("tflops"))
            if rate is not None:
                faster += best_rate is not None and float(rate) > best_rate
                continue
            entry = entry.get("avg_us", entry.get("us"))
        if entry is not None and float(entry) < best_us:
            faster += 1
    return faster + 1


#: What a policy never reads of a candidate (kilobytes of text and JSON per row).
_NOT_FOR_POLICIES = (Candidate.source, Candidate.compile_log, Candidate.feedback, Candidate.perf,
                     Candidate.reason)

#: What recording a result reads of the candidate (the feedback record's inputs; the large
#: columns it only writes stay unloaded).
_RECORD_LOAD = [defer(c) for c in (*_NOT_FOR_POLICIES, Candidate.correctness, Candidate.profile,
                                   Candidate.decision)]


#: What recording a successful compile reads of the campaign.
COMPILE_RECORD_LOAD = load_only(Campaign.id, Campaign.kernel, Campaign.arch)


def _history_item(family: Any, c: Candidate) -> HistoryItem:
    return HistoryItem(
        id=c.id, iteration=c.iteration, params=family.params_from_dict(c.params),
        key=c.params_key, status=c.status, action=c.action, parent_id=c.parent_id,
        avg_us=c.avg_us, accepted=c.accepted, compile=c.compile, profile=c.profile,
        correctness=c.correctness,
        improvement_pct=(c.decision or {}).get("improvement_pct"),
    )


# Statements built once (building one costs more CPU than running it); values are bound.
# A policy never reads the large columns: loading them at every decision made a campaign
# quadratic in its length.
_HISTORY = (select(Candidate).where(Candidate.campaign_id == bindparam("campaign_id"))
            .options(*(defer(c) for c in _NOT_FOR_POLICIES)).order_by(Candidate.iteration))
#: the candidates proposed after ``after`` and those of ``open_ids`` (in flight when last read)
_HISTORY_SINCE = _HISTORY.where(or_(Candidate.iteration > bindparam("after"),
                                    Candidate.id.in_(bindparam("open_ids", expanding=True))))
_AVG_US = select(Candidate.avg_us).where(Candidate.id == bindparam("candidate_id"))
_LOCK = (select(Campaign).where(Campaign.id == bindparam("id")).with_for_update()
         .execution_options(populate_existing=True))
#: The candidate and its campaign, both locked, in one round trip. Locking the candidate's row
#: too keeps what is read of it current: a statement that waited for the campaign's lock
#: returns the rows as the transaction it waited for left them (a second delivery of the same
#: result then finds the candidate finished), where a read before the lock would be stale.
_FOR_RECORD = (select(Candidate, Campaign).join(Campaign, Campaign.id == Candidate.campaign_id)
               .where(Candidate.id == bindparam("id")).options(*_RECORD_LOAD)
               .with_for_update().execution_options(populate_existing=True))


def candidate_for_record(session: Session, candidate_id: str) -> Candidate | None:
    """The candidate whose result is being recorded, without the large columns that recording
    only writes, with its campaign's row locked for the rest of the transaction (from the
    session when this transaction loaded and locked them already)."""
    locked: set[str] = _scratch(session).setdefault("locked", set())
    found = session.identity_map.get(identity_key(Candidate, candidate_id))
    if isinstance(found, Candidate) and found.campaign_id in locked:
        return found
    row = session.execute(_FOR_RECORD, {"id": candidate_id}).first()
    if row is None:
        return None
    cand, campaign = row
    locked.add(campaign.id)
    # held for the transaction: the session's identity map keeps only weak references
    _scratch(session).setdefault("held", []).append(campaign)
    return cand


_IN_FLIGHT = select(func.count()).select_from(Candidate).where(
    Candidate.campaign_id == bindparam("campaign_id"),
    Candidate.status.in_(CANDIDATE_IN_FLIGHT))


def history(session: Session, campaign: Campaign) -> list[HistoryItem]:
    """Every candidate of the campaign as a policy sees it, read in full from the database."""
    family = get_family(campaign.kernel)
    return [_history_item(family, c)
            for c in session.scalars(_HISTORY, {"campaign_id": campaign.id})]


# ---- what one transaction knows ---------------------------------------------------------------
_SCRATCH = "tuneforge.transaction"


def _scratch(session: Session) -> dict[str, Any]:
    """Per-transaction notes of this module (locks taken, history read), forgotten when the
    transaction ends (see the listeners below)."""
    notes: dict[str, Any] = session.info.setdefault(_SCRATCH, {})
    return notes


@event.listens_for(Session, "after_commit")
def _on_commit(session: Session) -> None:
    if session.in_nested_transaction():
        return  # a savepoint released: the transaction may still roll back
    for apply in _scratch(session).pop("on_commit", {}).values():
        apply()


@event.listens_for(Session, "after_soft_rollback")
def _on_rollback(session: Session, _previous: SessionTransaction) -> None:
    session.info.pop(_SCRATCH, None)  # even a savepoint's rollback releases its row locks


@event.listens_for(Session, "after_transaction_end")
def _on_transaction_end(session: Session, transaction: SessionTransaction) -> None:
    if transaction.parent is None:
        session.info.pop(_SCRATCH, None)


def lock_campaign(session: Session, campaign_id: str) -> Campaign:
    """The campaign row, locked for the rest of the transaction (``SELECT … FOR UPDATE`` and
    fresh from the database the first time in a transaction; from the session after that: the
    lock keeps every other writer out)."""
    locked: set[str] = _scratch(session).setdefault("locked", set())
    if campaign_id in locked:
        campaign = session.get(Campaign, campaign_id)
    else:
        campaign = session.scalars(_LOCK, {"id": campaign_id}).first()
        if campaign is not None:
            locked.add(campaign_id)
    if campaign is None:
        raise CampaignError(f"no campaign {campaign_id}")
    return campaign


@dataclass(frozen=True)
class _Known:
    """What a process knows of one campaign's candidates as of a committed read."""

    final: dict[str, HistoryItem]  # id -> item of every finished candidate read so far
    max_iteration: int  # every iteration up to here is in ``final`` or in ``open_ids``
    open_ids: tuple[str, ...]  # candidates in flight when read (they may have changed since)


class HistoryCache:
    """The decoded history of the campaigns this process decides for, read incrementally.

    What a policy reads of a finished candidate never changes again (only the engine's record
    of a result writes a final status and its figures, and only to a candidate in flight; the
    sanitizer gate's later record is not policy input), so each read fetches only the
    candidates proposed since the last read and those that were in flight then: a handful of
    rows, however long the campaign. The caller holds the campaign's row lock, so every
    candidate proposed before the read is committed and visible to it.

    What a transaction read enters the cache only when that transaction commits: a decision
    rolled back (with the results it recorded) leaves nothing behind. The list returned equals
    :func:`history`'s full read; ``tests/service/test_history_cache.py`` holds it to that.
    """

    def __init__(self, max_campaigns: int = 64) -> None:
        self.max_campaigns = max_campaigns
        self._known: OrderedDict[tuple[str, str], _Known] = OrderedDict()
        self._mutex = threading.Lock()
        self.rows_read = 0  # candidate rows decoded so far (a figure for tests and benches)

    def clear(self) -> None:
        """Forget every campaign."""
        with self._mutex:
            self._known.clear()

    def read(self, session: Session, campaign: Campaign) -> list[HistoryItem]:
        """Every candidate of ``campaign`` as a policy sees it, in iteration order (call with
        the campaign's row locked)."""
        key = (str(session.get_bind().engine.url), campaign.id)
        with self._mutex:
            known = self._known.get(key)
            if known is not None:
                self._known.move_to_end(key)
        found = (session.scalars(_HISTORY, {"campaign_id": campaign.id}) if known is None else
                 session.scalars(_HISTORY_SINCE, {
                     "campaign_id": campaign.id, "after": known.max_iteration,
                     "open_ids": list(known.open_ids)}))
        family = get_family(campaign.kernel)
        rows = [_history_item(family, c) for c in found]
        self.rows_read += len(rows)
        base = known.final if known is not None else {}
        fresh_final = {h.id: h for h in rows if h.status in CANDIDATE_FINAL}
        after = _Known(
            final={**base, **fresh_final} if fresh_final else base,
            max_iteration=max([h.iteration for h in rows],
                              default=known.max_iteration if known is not None else -1),
            open_ids=tuple(h.id for h in rows if h.status not in CANDIDATE_FINAL),
        )
        _scratch(session).setdefault("on_commit", {})[("history", key)] = (
            lambda: self._store(key, known, after))
        items = [*base.values(), *rows]
        items.sort(key=lambda h: h.iteration)
        return items

    def final_item(self, session: Session, campaign_id: str,
                   candidate_id: str) -> HistoryItem | None:
        """A finished candidate as a committed read found it (it cannot have changed since),
        or None when this process has not read it."""
        known = self._known.get((str(session.get_bind().engine.url), campaign_id))
        return known.final.get(candidate_id) if known is not None else None

    def _store(self, key: tuple[str, str], before: _Known | None, after: _Known) -> None:
        with self._mutex:
            if self._known.get(key) is not before:
                return  # another transaction of this process stored a newer read first
            self._known[key] = after
            self._known.move_to_end(key)
            while len(self._known) > self.max_campaigns:
                self._known.popitem(last=False)


#: The history cache of this process (decisions of the agent workers and of embedded mode).
HISTORY = HistoryCache()


def in_flight(session: Session, campaign_id: str) -> int:
    """Candidates proposed but not finished."""
    return int(session.scalar(_IN_FLIGHT, {"campaign_id": campaign_id}) or 0)


def _new_candidate(session: Session, campaign: Campaign, family: Any, params: Any, *,
                   action: str | None, reason: str, proposed_by: str,
                   parent_id: str | None) -> Candidate:
    params = params.canonical()
    rejection = family.validate(params, campaign.arch)
    source = family.render(params) if rejection is None else None
    cand = Candidate(
        id=new_id(),  # known now: the row is written with the transaction's other changes
        campaign_id=campaign.id, iteration=campaign.next_iteration, parent_id=parent_id,
        action=action, proposed_by=proposed_by, reason=reason, params=params.to_dict(),
        params_key=key_of(params), source=source,
        source_hash=family.source_hash(params) if source else None, status="pending",
    )
    campaign.next_iteration += 1
    session.add(cand)
    emit(session, campaign.id, "proposed", {
        "candidate_id": cand.id, "iteration": cand.iteration, "action": action,
        "reason": reason, "proposed_by": proposed_by, "params": cand.params,
    })
    return cand


# ---- lifecycle ------------------------------------------------------------------------------
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
        budget_wall_s=spec.budget_wall_s, budget_gpu_s=spec.budget_gpu_s,
        leaderboard=spec.leaderboard, start_from=spec.start_from,
        allowed_actions=spec.allowed_actions, injected_actions=[], vendor_us=vendor_us,
        sanitize=spec.sanitize, status="queued",
    )
    session.add(campaign)
    session.flush()
    emit(session, campaign.id, "created", {"kernel": family.name, "shape": campaign.shape_text,
                                           "policy": spec.policy, "backend": backend})
    return campaign


def warm_start_params(session: Session, campaign: Campaign) -> tuple[dict[str, Any], str] | None:
    """The best earlier result for the same kernel, GPU and team at the nearest shape."""
    rows = session.execute(
        select(Candidate, Campaign).join(Campaign, Candidate.campaign_id == Campaign.id).where(
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


def start_campaign(session: Session, campaign_id: str) -> list[Candidate]:
    """Running: the seed's baseline first (and the team's best earlier point if asked)."""
    campaign = lock_campaign(session, campaign_id)
    if campaign.status != "queued":
        return []
    family = get_family(campaign.kernel)
    campaign.status = "running"
    campaign.started_at = utcnow()
    emit(session, campaign.id, "started", {})
    created = [_new_candidate(session, campaign, family, family.baseline, action=None,
                              reason="the seed's baseline", proposed_by="baseline",
                              parent_id=None)]
    if campaign.start_from:
        found = warm_start_params(session, campaign)
        if found is None:
            emit(session, campaign.id, "note", {"kind": "warm_start", "message":
                                                "no earlier result for this kernel and GPU"})
        else:
            # a kernel specialized for the other campaign's shape starts here unspecialized
            params = family.for_shape(family.params_from_dict(found[0]), campaign.problem)
            if key_of(params) != created[0].params_key:
                created.append(_new_candidate(session, campaign, family, params,
                                              action="warm_start()", reason=found[1],
                                              proposed_by="warm_start",
                                              parent_id=created[0].id))
    return created


def budget_left(campaign: Campaign) -> tuple[int, str | None]:
    """Evaluations that may still be proposed, and the budget that is spent (if any)."""
    if campaign.budget_wall_s is not None and campaign.started_at is not None:
        started = _aware(campaign.started_at)
        assert started is not None
        if (utcnow() - started).total_seconds() >= campaign.budget_wall_s:
            return 0, f"wall-clock budget of {campaign.budget_wall_s:g} s spent"
    if campaign.budget_gpu_s is not None and campaign.gpu_seconds >= campaign.budget_gpu_s:
        return 0, f"GPU budget of {campaign.budget_gpu_s:g} s spent"
    left = campaign.budget_iterations - campaign.next_iteration
    if left <= 0:
        return 0, f"iteration budget of {campaign.budget_iterations} spent"
    return left, None


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


# ---- the loop's steps -----------------------------------------------------------------------
def propose_candidates(session: Session, campaign_id: str, *, policy: Policy,
                       space: SearchSpace, slots: int | None = None,
                       top_up_to: int | None = None, settings: Any = None,
                       cache: HistoryCache | None = HISTORY) -> list[Candidate]:
    """New candidates from the policy (the campaign row is locked): ``slots`` of them, or as
    many as keep ``top_up_to`` candidates in flight. ``cache=None`` reads the whole history."""
    campaign = lock_campaign(session, campaign_id)
    if campaign.status != "running":
        return []
    family = get_family(campaign.kernel)
    left, spent = budget_left(campaign)
    if spent is not None:
        if in_flight(session, campaign.id) == 0:
            finish_campaign(session, campaign, "done", spent)
        return []
    with session.no_autoflush:  # this transaction's changes are written once, at its end;
        # the rows it changed are read from the session, where they hold the new state
        items = (cache.read(session, campaign) if cache is not None
                 else history(session, campaign))
    pending = sum(1 for h in items if h.status in CANDIDATE_IN_FLIGHT)
    if top_up_to is not None:
        slots = top_up_to - pending
    if slots is None or slots <= 0:
        return []
    incumbent = next((h for h in items if h.id == campaign.incumbent_id), None)
    if incumbent is None:
        return []  # the baseline is still being measured
    ctx = PolicyContext(
        family=family, space=space, arch=campaign.arch, incumbent=incumbent, history=items,
        seed=campaign.seed, iteration=campaign.next_iteration,
        threshold_pct=campaign.accept_threshold_pct,
        allowed_actions=set(campaign.allowed_actions) if campaign.allowed_actions else None,
        stagnation=campaign.next_iteration - 1 - campaign.last_accept_iteration - pending,
        settings=settings, shape=campaign.problem,
        device=campaign.device, campaign_id=campaign.id,
    )
    wanted = min(slots, left)
    # injected actions first, whatever the policy (only the expert read them: a random or optuna
    # campaign took them and never tried them); one that cannot be tried is said so
    injected = list(campaign.injected_actions or [])
    proposals, kept, dropped = _injected_proposals(family, ctx, injected, wanted)
    for text, why in dropped:
        emit(session, campaign.id, "note", {"kind": "injected_not_tried", "action": text,
                                            "message": f"{text} was not tried: {why}"})
    if injected:
        campaign.injected_actions = kept
    if len(proposals) < wanted:
        proposals += policy.propose(ctx, wanted - len(proposals))
    for note in ctx.notes:
        emit(session, campaign.id, "note", note)
    created = [
        _new_candidate(session, campaign, family, p.params, action=p.action, reason=p.reason,
                       proposed_by=p.proposed_by, parent_id=p.parent_id)
        for p in proposals
    ]
    if not created and pending == 0:
        finish_campaign(session, campaign, "done", _nothing_to_propose(campaign, ctx))
    # what waits for its next step, as this transaction read it under the lock (the service's
    # plan needs no query of its own)
    _scratch(session).setdefault("waiting", {})[campaign.id] = [
        *((h.id, h.status) for h in items if h.status in ("pending", "compiled")),
        *((c.id, c.status) for c in created)]
    return created


def waiting(session: Session, campaign_id: str) -> list[tuple[str, str]] | None:
    """Candidates waiting for their next step (id, ``pending`` or ``compiled``) as this
    transaction's decision read them, or None when it read none. A candidate that moved on
    since (a worker took it) was sent already: sending it again is a no-op of the guard."""
    found: list[tuple[str, str]] | None = _scratch(session).get("waiting", {}).get(campaign_id)
    return found


def _nothing_to_propose(campaign: Campaign, ctx: PolicyContext) -> str:
    """Why a campaign with budget left ends: the search space is exhausted, or (a policy's
    empty answer proves nothing of the kind: optuna gives up after 60 draws it had seen) the
    policy found no new point where unexplored ones remain."""
    listed = getattr(ctx.space, "points", None)
    candidates = listed() if callable(listed) else ctx.space.sample(ctx.rng(salt=97), 256)
    left = sum(1 for params in candidates if ctx.fresh(params))
    if left == 0 and callable(listed):
        return "search space exhausted: no unexplored point left to propose"
    explored = len(ctx.explored)
    if left == 0:
        return (f"the {campaign.policy} policy proposed no new point ({explored} explored; "
                "the search space may be exhausted)")
    how_many = f"{left} unexplored points remain" if callable(listed) else \
        "unexplored points remain"
    reach = " with the allowed actions" if campaign.allowed_actions else ""
    return (f"the {campaign.policy} policy proposed no new point{reach} ({explored} explored, "
            f"{how_many} in the search space)")


def _injected_proposals(family: Any, ctx: PolicyContext, injected: list[str], n: int
                        ) -> tuple[list[Proposal], list[str], list[tuple[str, str]]]:
    """The campaign's ``injected`` actions applied to the incumbent, in the order they came: up to
    ``n`` proposals, the actions left for a later decision (no slot now), and those that cannot
    be tried with the reason. A proposed point joins ``ctx.explored``, so the policy does not
    propose it again in the same decision."""
    from kernels.base import Rejection

    inc = ctx.incumbent
    assert inc is not None
    out: list[Proposal] = []
    kept: list[str] = []
    dropped: list[tuple[str, str]] = []
    for text in injected:
        if len(out) >= n:
            kept.append(text)
            continue
        result = family.apply(ctx.point(inc.params), text)
        if isinstance(result, Rejection):
            dropped.append((text, f"refused from the incumbent (#{inc.iteration}): "
                                  f"{result.message}"))
            continue
        params = result.params
        invalid = family.validate(params, ctx.arch)
        key = key_of(params)
        if invalid is not None:
            dropped.append((text, f"from the incumbent (#{inc.iteration}) it gives an invalid "
                                  f"point: {invalid.message}"))
        elif key in ctx.explored:
            seen = next((h for h in ctx.history if h.key == key), None)
            where = f" (#{seen.iteration})" if seen is not None else ""
            dropped.append((text, f"from the incumbent (#{inc.iteration}) it gives a point "
                                  f"evaluated already{where}"))
        elif not ctx.space.contains(params):
            dropped.append((text, f"from the incumbent (#{inc.iteration}) it gives a point "
                                  "outside this campaign's search space (a replay has the "
                                  "measured points only)"))
        else:
            ctx.explored.add(key)
            out.append(Proposal(params, str(Action.parse(text)),
                                "injected into the running campaign", "injected", inc.id))
    return out, kept, dropped


def record_compile(session: Session, candidate_id: str, result: CompileResult) -> Candidate:
    """Store the compile figures (idempotent); a failed compile is the candidate's outcome."""
    cand = candidate_for_record(session, candidate_id)
    if cand is None:
        raise CampaignError(f"no candidate {candidate_id}")
    if cand.status not in ("pending", "compiling"):
        return cand  # a redelivered task: the result is already there
    campaign = session.get(Campaign, cand.campaign_id, options=[COMPILE_RECORD_LOAD])
    assert campaign is not None
    for name, value in compile_columns(campaign.kernel, campaign.arch, result).items():
        setattr(cand, name, value)
    if result.status == "ok":
        cand.status = "compiled"
        cand.claimed_by = None
        return cand
    status = result.failure_status or "compile_error"
    _finalize(session, cand.campaign_id, cand, status,
              Measurement(status, error=result.error))
    return cand


def record_measurement(session: Session, candidate_id: str, m: Measurement) -> Candidate:
    """Store the measurement (idempotent), decide, check the budget."""
    cand = candidate_for_record(session, candidate_id)
    if cand is None:
        raise CampaignError(f"no candidate {candidate_id}")
    if cand.status not in CANDIDATE_IN_FLIGHT:
        return cand
    _finalize(session, cand.campaign_id, cand, m.status, m)
    return cand


def record_failure(session: Session, candidate_id: str, status: str, error: str) -> Candidate:
    """A candidate whose evaluation could not complete (e.g. it killed its worker twice)."""
    return record_measurement(session, candidate_id, Measurement(status, error=error))


def _decide(campaign: Campaign, m: Measurement, *, first: bool,
            incumbent_us: float | None) -> dict[str, Any]:
    if m.status != "ok" or not m.perf:
        why = m.error or m.status
        if m.status == "wrong" and m.correctness:
            why = m.correctness.get("reason") or why
        return {"accepted": False, "improvement_pct": None,
                "reason": f"{m.status}: {why}"[:500]}
    cand_us = float(m.perf["avg_us"])
    if first:
        return {"accepted": True, "improvement_pct": None,
                "reason": "first correct kernel: the incumbent"}
    runs = [float(r) for r in m.perf["runs_us"]]
    inc_runs = [float(r) for r in (m.incumbent_runs_us or [])]
    if inc_runs:
        inc_us = statistics.median(inc_runs)
        confident = max(runs) < min(inc_runs)
        basis = "interleaved A/B in one process"
    else:
        inc_us = float(incumbent_us or math.inf)
        confident = True
        basis = "against the incumbent's recorded time"
    # improvement_pct (and the threshold) is the share of the incumbent's time saved; the reason
    # also says the speed-up, which is what a kernel engineer reads (81 % less time is 5.3x)
    improvement = 100.0 * (inc_us - cand_us) / inc_us
    threshold = campaign.accept_threshold_pct
    change = (f"{inc_us / cand_us:.3f}x the incumbent's speed (time {-improvement:+.2f}%, "
              f"{basis})" if math.isfinite(inc_us) else f"no incumbent time ({basis})")
    if improvement > threshold and confident:
        return {"accepted": True, "improvement_pct": round(improvement, 3),
                "reason": f"{change}, above the {threshold:g}% threshold"}
    if improvement > threshold:
        why = f"{change}, but the runs overlap the incumbent's: not confident; revert"
    else:
        why = f"{change}, below the {threshold:g}% threshold; revert"
    return {"accepted": False, "improvement_pct": round(improvement, 3), "reason": why}


def _finalize(session: Session, campaign_id: str, cand: Candidate, status: str,
              m: Measurement) -> None:
    campaign = lock_campaign(session, campaign_id)
    incumbent: Any = None  # what the decision reads of the incumbent: its avg_us
    if campaign.incumbent_id:
        incumbent = HISTORY.final_item(session, campaign.id, campaign.incumbent_id) or \
            session.execute(_AVG_US, {"candidate_id": campaign.incumbent_id}).first()
    cand.status = status
    cand.claimed_by = None  # the step is over: no worker holds the candidate any more
    cand.correctness = m.correctness
    cand.perf = m.perf
    cand.profile = m.profile
    cand.error = m.error
    cand.gpu_seconds = m.gpu_seconds
    cand.avg_us = float(m.perf["avg_us"]) if m.perf and status == "ok" else None
    cand.finished_at = utcnow()
    decision = _decide(campaign, m, first=incumbent is None,
                       incumbent_us=incumbent.avg_us if incumbent is not None else None)
    cand.decision = decision
    cand.accepted = bool(decision["accepted"])
    campaign.evaluations += 1
    campaign.gpu_seconds += m.gpu_seconds
    if cand.accepted:
        campaign.incumbent_id = cand.id
        campaign.last_accept_iteration = cand.iteration
        if campaign.best_us is None or (cand.avg_us or math.inf) < campaign.best_us:
            campaign.best_id = cand.id
            campaign.best_us = cand.avg_us
    if cand.iteration == 0:
        campaign.baseline_id = cand.id
        if status != "ok":
            finish_campaign(session, campaign, "failed",
                            f"the baseline did not pass: {decision['reason']}")
    cand.feedback = build_feedback(campaign, cand)
    emit(session, campaign.id, "result", {
        "candidate_id": cand.id, "iteration": cand.iteration, "action": cand.action,
        "status": status, "avg_us": cand.avg_us,
        "throughput": (m.perf or {}).get("throughput") if status == "ok" else None,
        "unit": (m.perf or {}).get("unit") if status == "ok" else None,
        "decision": decision, "best_us": campaign.best_us, "best_id": campaign.best_id,
        "evaluations": campaign.evaluations,
    })
    if campaign.status == "running":
        left, spent = budget_left(campaign)
        if spent is not None and in_flight(session, campaign.id) == 0:
            finish_campaign(session, campaign, "done", spent)


def build_feedback(campaign: Campaign, cand: Candidate) -> dict[str, Any]:
    """The feedback record of DESIGN.md §5, validated against :class:`FeedbackRecord`."""
    family = get_family(campaign.kernel)
    compile_block = dict(cand.compile or {
        "seconds": 0.0, "max_smem_limit": family.max_smem_limit(campaign.arch)})
    compile_status = compile_block.pop("status", None) or (
        "ok" if cand.status not in ("rejected", "compile_error", "compile_timeout") else "error")
    best_rate = family.metric.rate(campaign.problem, campaign.best_us)
    best = {"candidate_id": campaign.best_id, "avg_us": campaign.best_us,
            "throughput": round(best_rate, 4) if best_rate else None,
            "unit": family.metric.unit,
            "rank_est": rank_estimate(campaign.leaderboard, campaign.best_us, best_rate)}
    if family.metric.kind == "flops":  # the seed's field
        best["throughput_tflops"] = best["throughput"]
    record = FeedbackRecord.model_validate({
        "iteration": cand.iteration, "campaign_id": campaign.id, "candidate_id": cand.id,
        "parent_id": cand.parent_id, "action_taken": cand.action, "params": cand.params,
        "status": cand.status, "compile_status": compile_status, "compile": compile_block,
        "correctness": cand.correctness, "perf": cand.perf, "profile": cand.profile,
        "decision": cand.decision,
        "best_so_far": best,
        "device": campaign.device, "backend": campaign.backend, "error": cand.error,
    })
    return record.model_dump(mode="json")
