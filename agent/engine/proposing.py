"""The next candidates of a running campaign: injected actions first, then the policy's
proposals, under the campaign's row lock; a campaign with nothing left to propose ends.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from agent.engine.history import HISTORY, HistoryCache, history, in_flight
from agent.engine.lifecycle import budget_left, finish_campaign, new_candidate, settled
from agent.engine.locking import emit, lock_campaign, scratch
from agent.policies.base import (
    Policy,
    PolicyContext,
    Proposal,
    SearchSpace,
    ShapeOutcome,
    key_of,
)
from core.models import Campaign, Candidate
from core.statuses import CANDIDATE_IN_FLIGHT
from kernels import get_family
from kernels.base import Action


def propose_candidates(session: Session, campaign_id: str, *, policy: Policy,
                       space: SearchSpace, slots: int | None = None,
                       top_up_to: int | None = None, settings: Any = None,
                       cache: HistoryCache | None = HISTORY,
                       other_shapes: tuple[ShapeOutcome, ...] = ()) -> list[Candidate]:
    """New candidates from the policy (the campaign row is locked): ``slots`` of them, or as
    many as keep ``top_up_to`` candidates in flight, proposed one at a time (each proposal sees
    the ones before it in flight, as a decision taken after each result would).
    ``cache=None`` reads the whole history; ``other_shapes``: what the campaign's shape set
    found at its other shapes (the policy's context carries it)."""
    if top_up_to is None:
        return _propose(session, campaign_id, policy=policy, space=space, slots=slots,
                        settings=settings, cache=cache, other_shapes=other_shapes)[0]
    created: list[Candidate] = []
    while True:
        more, free = _propose(session, campaign_id, policy=policy, space=space,
                              top_up_to=top_up_to, settings=settings, cache=cache, at_most=1,
                              other_shapes=other_shapes)
        created += more
        if not more or free <= 0:
            # no slot left: the next round would read the history again to find none
            return created
        session.flush()  # the next round's history read finds the new candidate in flight


def _propose(session: Session, campaign_id: str, *, policy: Policy, space: SearchSpace,
             slots: int | None = None, top_up_to: int | None = None, settings: Any = None,
             cache: HistoryCache | None = HISTORY, at_most: int | None = None,
             other_shapes: tuple[ShapeOutcome, ...] = ()) -> tuple[list[Candidate], int]:
    """One round of :func:`propose_candidates` (at most ``at_most`` new candidates): the new
    candidates and the slots of ``top_up_to`` still free after them (0 when none is, or
    nothing more may be proposed now)."""
    campaign = lock_campaign(session, campaign_id)
    if campaign.status != "running":
        return [], 0
    family = get_family(campaign.kernel)
    left, spent = budget_left(campaign)
    if spent is not None:
        if in_flight(session, campaign.id) == 0:
            finish_campaign(session, campaign, "done", spent)
        return [], 0
    with session.no_autoflush:  # this transaction's changes are written once, at its end;
        # the rows it changed are read from the session, where they hold the new state
        items = (cache.read(session, campaign) if cache is not None
                 else history(session, campaign))
    pending = sum(1 for h in items if h.status in CANDIDATE_IN_FLIGHT)
    if top_up_to is not None:
        slots = top_up_to - pending
    if slots is not None and at_most is not None:
        slots = min(slots, at_most)
    if slots is None or slots <= 0:
        return [], 0
    incumbent = next((h for h in items if h.id == campaign.incumbent_id), None)
    if incumbent is None:
        return [], 0  # the baseline is still being measured
    ctx = PolicyContext(
        family=family, space=space, arch=campaign.arch, incumbent=incumbent, history=items,
        seed=campaign.seed, iteration=campaign.next_iteration,
        threshold_pct=campaign.accept_threshold_pct,
        allowed_actions=set(campaign.allowed_actions) if campaign.allowed_actions else None,
        stagnation=campaign.next_iteration - 1 - campaign.last_accept_iteration - pending,
        settings=settings, shape=campaign.problem, tolerance=campaign.tolerance,
        device=campaign.device, campaign_id=campaign.id, other_shapes=other_shapes,
    )
    why = settled(campaign, ctx)
    if why is not None:  # nothing more is proposed; it ends once the last result is in
        if pending == 0:
            finish_campaign(session, campaign, "done", why)
        return [], 0
    wanted = min(slots, left)
    # injected actions first, whatever the policy (only the expert read them: a random or optuna
    # campaign took them and never tried them); one that cannot be tried is said so
    injected = list(campaign.injected_actions or [])
    proposals, kept, dropped = _injected_proposals(family, ctx, injected, wanted)
    # after_iteration: where the decision chain shows the note (after the last candidate then)
    after = campaign.next_iteration - 1
    for text, why in dropped:
        emit(session, campaign.id, "note", {"kind": "injected_not_tried", "action": text,
                                            "message": f"{text} was not tried: {why}",
                                            "after_iteration": after})
    if injected:
        campaign.injected_actions = kept
    if len(proposals) < wanted:
        proposals += policy.propose(ctx, wanted - len(proposals))
    for note in ctx.notes:
        emit(session, campaign.id, "note", {"after_iteration": after, **note})
    created = [
        new_candidate(session, campaign, family, p.params, action=p.action, reason=p.reason,
                       proposed_by=p.proposed_by, parent_id=p.parent_id)
        for p in proposals
    ]
    if not created and pending == 0:
        finish_campaign(session, campaign, "done", _nothing_to_propose(campaign, ctx))
    # what waits for its next step, as this transaction read it under the lock (the service's
    # plan needs no query of its own)
    scratch(session).setdefault("waiting", {})[campaign.id] = [
        *((h.id, h.status) for h in items if h.status in ("pending", "compiled")),
        *((c.id, c.status) for c in created)]
    free = top_up_to - pending - len(created) if top_up_to is not None else 0
    return created, free


def waiting(session: Session, campaign_id: str) -> list[tuple[str, str]] | None:
    """Candidates waiting for their next step (id, ``pending`` or ``compiled``) as this
    transaction's decision read them, or None when it read none. A candidate that moved on
    since (a worker took it) was sent already: sending it again is a no-op of the guard."""
    found: list[tuple[str, str]] | None = scratch(session).get("waiting", {}).get(campaign_id)
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
