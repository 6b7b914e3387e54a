"""The built-in expert policy: the family's profile-driven rule book, then local numeric search.

Each decision starts from the rule book (:meth:`kernels.family.KernelFamily.expert_moves`: the
``(action, reason)`` moves its signals call for, best first), keeping the moves that are valid,
allowed, in the space and not tried yet (actions injected into a running campaign come before
any policy's proposals: the engine tries them,
:func:`agent.engine.proposing.propose_candidates`). Then local numeric search over the rest of
the one-step neighbourhood: transforms that paid first (a running mean of their improvements),
untried ones next. A move the family holds back until the
structure has settled (:meth:`~kernels.family.KernelFamily.held_until_settled`) is left to the
rule book until a stagnation window has passed without an acceptance.

A point measured once is never proposed again (so no ping-pong between two block shapes); a
point that lost rules out nothing else. After ``stagnation_window`` evaluations without an
acceptance the action set widens to two-step moves; after three windows, to the neighbourhoods
of the best few points instead of the incumbent alone. When all of those are spent it widens to
the neighbourhoods of every correct point, fastest first, so the policy runs dry only when no
evaluated point has an unexplored neighbour left.

What it derives from a campaign's history (the payoffs, the correct points fastest first,
each point's unexplored moves, the two-step walks from the incumbent) it keeps between
decisions, per campaign (:class:`_Memory`), and brings it up to date from the candidates that
are new or finished since: a decision costs about the same at 1000 candidates as at 100.
Everything kept is a function of the history alone, checked against it at every decision, so
any process may decide for any campaign after any other; a history that does not extend the one
remembered (a decision rolled back after the policy saw it) is read afresh. The proposals are
exactly those of a decision computed from the history alone (``tests/test_expert_memory.py``
holds it to that against a stateless search).
"""

from __future__ import annotations

import bisect
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import chain
from typing import Any

from agent.policies.base import (
    HistoryItem,
    PolicyContext,
    Proposal,
    key_of,
)
from core.arch import theoretical_occupancy
from core.statuses import CANDIDATE_IN_FLIGHT
from kernels.base import Action, Dims, Rejection

#: evaluations without an acceptance after which the structure counts as settled and the
#: search widens
STAGNATION_WINDOW = 12


#: campaigns whose memory one policy object keeps (least recently decided forgotten first)
MAX_CAMPAIGNS = 64

@dataclass(frozen=True)
class _Move:
    """A one-transform move from a point to a valid point of the space (fixed by the point, the
    family and the space; whether it is still fresh or allowed is decided at each decision)."""

    action: Action
    params: Any
    key: str
    #: held back by the family until the structure has settled (search proposes it then only)
    special: bool


@dataclass(frozen=True)
class _Offer:
    """A proposal with its point's key when already known."""

    proposal: Proposal
    key: str | None = None


class _Memory:
    """What the policy has derived from one campaign's history, brought up to date at each
    decision from the candidates that are new or finished since the last one.

    Kept: the payoff of each transform (mean clipped improvement, summed in iteration order as a
    full pass adds them), the correct points fastest first, the unexplored moves of every point
    searched so far (pruned as their points are explored: that only grows while the history only
    grows, so a point with none left is never searched again), and the two-step walks from the
    incumbent. A decision's history must extend the one remembered: every candidate seen before
    is still there, and only those that were in flight have changed; otherwise :meth:`absorb`
    says so and the policy starts a new memory.
    """

    def __init__(self, ctx: PolicyContext) -> None:
        self.family = ctx.family
        self.space = ctx.space
        self.arch = ctx.arch
        self.shape = ctx.shape
        self.allowed = ctx.allowed_actions
        self.transforms = ctx.family.transforms.names()
        #: what the memory took in of each candidate (:func:`_facts`)
        self.seen: dict[str, tuple[Any, ...]] = {}
        self._gains: dict[str, list[tuple[int, float]]] = {}
        self.payoffs: dict[str, tuple[float, int]] = {}
        #: (avg_us, iteration, item) of every correct point
        self.ranked: list[tuple[float, int, HistoryItem]] = []
        self._moves: dict[str, list[_Move]] = {}
        self._walks_from: str | None = None
        self._walks: dict[tuple[int, ...], Any] = {}
        self._firsts: list[tuple[str, bool, list[Action]]] | None = None

    def fits(self, ctx: PolicyContext) -> bool:
        """Whether this memory was built for the same family, space and action set."""
        return (ctx.family is self.family and ctx.space is self.space
                and ctx.arch == self.arch and ctx.shape == self.shape
                and ctx.allowed_actions == self.allowed
                and ctx.family.transforms.names() == self.transforms)

    def absorb(self, history: Iterable[HistoryItem]) -> bool:
        """Take in the candidates new or finished since the last decision; False (and nothing
        changed) when ``history`` does not extend the history remembered."""
        known = self.seen
        found = 0
        changed: list[HistoryItem] = []
        for h in history:
            before = known.get(h.id)
            if before is None:
                changed.append(h)
                continue
            found += 1
            now = _facts(h)
            if now != before:
                if before[2] not in CANDIDATE_IN_FLIGHT:
                    # a finished candidate in flight again, or finished otherwise: what the
                    # memory took in came from a transaction that did not commit
                    return False
                changed.append(h)
        if found != len(known):
            return False  # a candidate seen before is gone: its proposal was rolled back
        for h in changed:
            known[h.id] = _facts(h)
            if h.status not in CANDIDATE_IN_FLIGHT:
                self._finished(h)
        return True

    def _finished(self, h: HistoryItem) -> None:
        if h.action is not None and h.improvement_pct is not None:
            name = h.action.split("(")[0]
            gains = self._gains.setdefault(name, [])
            bisect.insort(gains, (h.iteration, max(min(h.improvement_pct, 50.0), -50.0)))
            total = 0.0
            for _iteration, gain in gains:  # in iteration order, as a full pass adds them
                total += gain
            self.payoffs[name] = (total / len(gains), len(gains))
        if h.status == "ok" and h.avg_us is not None:
            bisect.insort(self.ranked, (h.avg_us or 0.0, h.iteration, h))

    def top(self, k: int) -> list[HistoryItem]:
        """The ``k`` fastest correct points (ties: the earlier first)."""
        return [h for _us, _it, h in self.ranked[:k]]

    def moves(self, ctx: PolicyContext, start: HistoryItem) -> list[_Move]:
        """The moves from ``start`` to points not explored yet (in the order of
        :meth:`PolicyContext.neighbours`)."""
        found = self._moves.get(start.key)
        if found is None:
            found = self._moves[start.key] = _all_moves(ctx, start.params)
        explored = ctx.explored
        live = [m for m in found if m.key not in explored]
        if len(live) != len(found):
            self._moves[start.key] = live
        return live

    def firsts(self, ctx: PolicyContext) -> list[tuple[str, bool, list[Action]]]:
        """Every transform with whether a two-step walk may use it, and its actions the space
        can hold."""
        if self._firsts is None:
            self._firsts = [
                (spec.name, spec.name != "revert_last" and ctx.action_allowed(spec.name),
                 [a for a in spec.actions() if ctx.in_domains(spec, a)])
                for spec in ctx.family.transforms]
        return self._firsts

    def walks(self, incumbent: HistoryItem) -> dict[tuple[int, ...], Any]:
        """Where the two-step walks from ``incumbent`` led (transform and action indices ->
        the point reached, or None for a rejection), forgotten when the incumbent changes."""
        if self._walks_from != incumbent.key:
            self._walks_from, self._walks = incumbent.key, {}
        return self._walks


def _facts(h: HistoryItem) -> tuple[Any, ...]:
    """What the memory derives anything from, of one candidate (its compile and profile
    figures are read afresh from the context: only the incumbent's and the last one's)."""
    return (h.iteration, h.key, h.status, h.action, h.avg_us, h.improvement_pct)


def _all_moves(ctx: PolicyContext, params: Any) -> list[_Move]:
    """The one-transform moves from ``params`` to valid points of the space, explored or not:
    what :meth:`PolicyContext.neighbours` yields with nothing explored."""
    node = ctx.point(params)
    out: list[_Move] = []
    seen: set[str] = set()
    for spec in ctx.family.transforms:
        if spec.name == "revert_last" or not ctx.action_allowed(spec.name):
            continue
        for action in spec.actions():
            if not ctx.in_domains(spec, action):
                continue
            result = ctx.family.apply(node, action)
            if isinstance(result, Rejection):
                continue
            point = result.params
            if ctx.family.validate(point, ctx.arch) is not None or not ctx.space.contains(point):
                continue  # never fresh (and, as there, not counted as seen)
            key = key_of(point)
            if key in seen:
                continue
            seen.add(key)
            out.append(_Move(action, point, key, ctx.family.held_until_settled(action)))
    return out


def local_search_reason(iteration: int, action: str, payoff: tuple[float, int]) -> str:
    """Why a local-search move was offered: the transform's record so far in the campaign (the
    mean share of the incumbent's time each try saved, clipped to +-50 %, said as the change of
    time, as the decisions say it), or that none of its tries was timed yet."""
    mean, count = payoff
    if not count:
        return f"local search from #{iteration}: {action}, no timed try of it yet in this campaign"
    tries = "try" if count == 1 else "tries"
    return (f"local search from #{iteration}: {action}, whose {count} {tries} so far "
            f"changed the time by {(-mean or 0.0):+.1f}% on average")


class ExpertPolicy:
    """Profile-driven rules from the seed, then local search (see the module docstring).

    One object may decide for many campaigns, from several threads: it keeps a memory per
    campaign (``ctx.campaign_id``; a context without one is decided from its history alone)."""

    name = "expert"

    def __init__(self, stagnation_window: int = STAGNATION_WINDOW,
                 max_campaigns: int = MAX_CAMPAIGNS) -> None:
        self.stagnation_window = stagnation_window
        self.max_campaigns = max_campaigns
        self._memories: OrderedDict[str, _Memory] = OrderedDict()
        self._mutex = threading.Lock()
        self.memories_built = 0  # a figure for tests and benches: fresh memories so far

    def propose(self, ctx: PolicyContext, n: int) -> list[Proposal]:
        """Up to ``n`` fresh proposals from the incumbent (or wider after stagnation)."""
        if ctx.incumbent is None:
            return []
        with self._mutex:
            memory = self._memory(ctx)
            return self._propose(ctx, n, memory)

    def _memory(self, ctx: PolicyContext) -> _Memory:
        """This campaign's memory, brought up to date with ``ctx.history`` (a new one when the
        history does not extend the one remembered, or the campaign is not named)."""
        campaign = ctx.campaign_id
        found = self._memories.get(campaign) if campaign is not None else None
        if campaign is not None and found is not None and found.fits(ctx) and \
                found.absorb(ctx.history):
            self._memories.move_to_end(campaign)
            return found
        memory = _Memory(ctx)
        memory.absorb(ctx.history)
        self.memories_built += 1
        if campaign is not None:
            self._memories[campaign] = memory
            self._memories.move_to_end(campaign)
            while len(self._memories) > self.max_campaigns:
                self._memories.popitem(last=False)
        return memory

    def _propose(self, ctx: PolicyContext, n: int, memory: _Memory) -> list[Proposal]:
        inc = ctx.incumbent
        assert inc is not None
        out = [_Offer(p) for p in self._ruled(ctx)]
        out += self._toward_other_shapes(ctx, memory, inc)
        out += self._local_search(ctx, memory, inc)
        if ctx.stagnation >= self.stagnation_window:
            out += [_Offer(p, key) for p, key in self._two_step(ctx, memory)]
        if ctx.stagnation >= 3 * self.stagnation_window or not out:
            for item in memory.top(3):
                out += self._local_search(ctx, memory, item)
        chosen: list[Proposal] = []
        taken: set[str] = set()
        for offer in chain(out, self._everywhere(ctx, memory)):
            p = offer.proposal
            key = offer.key or key_of(p.params)
            if key in taken:
                continue
            taken.add(key)
            chosen.append(p)
            if len(chosen) >= n:
                break
        return chosen

    # -- rules ---------------------------------------------------------------------------------
    def _move(self, ctx: PolicyContext, text: str, reason: str) -> Proposal | None:
        """The incumbent moved by ``text``: one action, or a chain ``"a(1) ; b(2)"`` applied in
        order (a rule whose destination is two transforms away); None when an action is
        unknown, not allowed or rejected, or the point was tried."""
        inc = ctx.incumbent
        assert inc is not None
        try:
            actions = Action.parse_many(text)
            for action in actions:
                ctx.family.transforms.check(action)
        except ValueError:
            return None
        if not actions or not all(ctx.action_allowed(a.name) for a in actions):
            return None
        node = ctx.point(inc.params)
        for action in actions:
            result = ctx.family.apply(node, action)
            if isinstance(result, Rejection):
                return None
            node = result
        if not ctx.fresh(node.params):
            return None
        return Proposal(node.params, " ; ".join(str(a) for a in actions), reason, self.name,
                        inc.id)

    def _ruled(self, ctx: PolicyContext) -> list[Proposal]:
        """The family's rule-book moves from the incumbent that can be proposed, in its order."""
        out = []
        for text, reason in ctx.family.expert_moves(_RuleView(ctx, self._settled(ctx))):
            prop = self._move(ctx, text, reason)
            if prop is not None:
                out.append(prop)
        return out

    def _settled(self, ctx: PolicyContext) -> bool:
        """Whether a stagnation window has passed without an acceptance."""
        return ctx.stagnation >= self.stagnation_window

    # -- a shape set's other shapes -------------------------------------------------------------
    def _toward_other_shapes(self, ctx: PolicyContext, memory: _Memory,
                             inc: HistoryItem) -> list[_Offer]:
        """In a shape set: the moves from the incumbent that bring it closer to the best found
        at a nearby shape (more of its parameters equal to that best's), nearest shape first,
        the moves that close most of the gap first."""
        out: list[_Offer] = []
        here = inc.params.canonical().to_dict()
        for other in ctx.other_shapes[:3]:
            target = ctx.family.for_shape(other.best_params, ctx.shape).canonical().to_dict() \
                if ctx.shape is not None else other.best_params.canonical().to_dict()
            before = sum(here.get(k) == v for k, v in target.items())
            if before == len(target):
                continue  # the incumbent is that best already
            gains: list[tuple[int, int, _Move]] = []
            for move in memory.moves(ctx, inc):
                point = move.params.canonical().to_dict()
                gain = sum(point.get(k) == v for k, v in target.items()) - before
                if gain > 0:
                    gains.append((-gain, len(gains), move))
            gains.sort(key=lambda t: (t[0], t[1]))
            out += [_Offer(Proposal(move.params, str(move.action), (
                f"toward the best at {other.shape} (the set's shape {other.distance:.2f} "
                f"away, {other.best_us:.1f} µs there): {move.action} makes {-g} more of its "
                "parameters equal"), self.name, inc.id), move.key) for g, _i, move in gains[:4]]
        return out

    # -- search --------------------------------------------------------------------------------
    def _local_search(self, ctx: PolicyContext, memory: _Memory,
                      start: HistoryItem) -> list[_Offer]:
        """The unexplored moves from ``start``, transforms that paid first, untried next (a
        seeded random tie-break); in a shape set, an untried transform ranks by what it paid
        at the other shapes (nearer shapes weigh more)."""
        payoffs = memory.payoffs
        scored = []
        rng = ctx.rng(salt=len(ctx.history))
        settled = self._settled(ctx)
        prior = _prior(ctx)
        for move in memory.moves(ctx, start):
            if move.special and not settled:
                continue  # by rule only, once the structure has settled
            mean, count = payoffs.get(move.action.name, (0.0, 0))
            bonus = 1.0 / (1 + count)  # untried transforms first among equals
            if not count:
                bonus += prior.get(move.action.name, 0.0)
            scored.append((mean + bonus + rng.random() * 0.01, move))
        scored.sort(key=lambda t: -t[0])
        return [_Offer(Proposal(move.params, str(move.action),
                                local_search_reason(start.iteration, move.action.name,
                                                    payoffs.get(move.action.name, (0.0, 0))),
                                self.name, start.id), move.key)
                for _, move in scored]

    def _two_step(self, ctx: PolicyContext, memory: _Memory) -> list[tuple[Proposal, str]]:
        """Up to 8 fresh points two random transforms away from the incumbent (200 seeded
        walks; where a walk leads is remembered while the incumbent stays)."""
        inc = ctx.incumbent
        assert inc is not None
        rng = ctx.rng(salt=97)
        firsts = memory.firsts(ctx)
        picks = range(len(firsts))
        walks = memory.walks(inc)
        out: list[tuple[Proposal, str]] = []
        explored = ctx.explored
        for _ in range(200):
            path: tuple[int, ...] = ()
            reached: Any = None
            steps = []
            for _step in range(2):
                # the draws are those of ``rng.choice`` over the transforms, then their actions
                i = rng.choice(picks)
                _name, usable, actions = firsts[i]
                if not usable or not actions:
                    break
                j = rng.choice(range(len(actions)))
                before, path = reached, (*path, i, j)
                if path not in walks:
                    result = ctx.family.apply(before[0] if before else ctx.point(inc.params),
                                              actions[j])
                    walks[path] = None if isinstance(result, Rejection) else (
                        result, key_of(result.params),
                        ctx.family.validate(result.params, ctx.arch) is None
                        and ctx.space.contains(result.params))
                reached = walks[path]
                if reached is None:
                    break
                steps.append(str(actions[j]))
            if len(steps) == 2 and reached[2] and reached[1] not in explored:
                out.append((Proposal(reached[0].params, " ; ".join(steps),
                                     f"stagnation ({ctx.stagnation} evaluations without an "
                                     "acceptance): two-step move", self.name, inc.id),
                            reached[1]))
            if len(out) >= 8:
                break
        return out

    def _everywhere(self, ctx: PolicyContext, memory: _Memory) -> Iterator[_Offer]:
        """The neighbourhoods of every correct point, fastest first (lazily: only reached when
        the narrower neighbourhoods are spent). A point with no move left offers nothing and is
        passed over."""
        settled = self._settled(ctx)
        for _us, _iteration, item in memory.ranked:
            if any(settled or not move.special for move in memory.moves(ctx, item)):
                yield from self._local_search(ctx, memory, item)


def _prior(ctx: PolicyContext) -> dict[str, float]:
    """What each transform paid at the shape set's other shapes, in the campaign's payoff unit
    (mean % of the incumbent's time saved), weighted by nearness (empty outside a set)."""
    if not ctx.other_shapes:
        return {}
    total: dict[str, float] = {}
    weights: dict[str, float] = {}
    for other in ctx.other_shapes:
        w = 1.0 / (1.0 + other.distance)
        for name, paid in other.payoffs.items():
            total[name] = total.get(name, 0.0) + w * paid
            weights[name] = weights.get(name, 0.0) + w
    return {name: total[name] / weights[name] for name in total}


@dataclass(frozen=True)
class _RuleView:
    """A decision as the family's rule book reads it (:class:`kernels.family.RuleContext`):
    the policy context and whether this policy judges the structure settled."""

    ctx: PolicyContext
    settled: bool

    @property
    def family(self) -> Any:
        """The family decided for."""
        return self.ctx.family

    @property
    def arch(self) -> str:
        """The GPU's arch."""
        return self.ctx.arch

    @property
    def shape(self) -> Dims | None:
        """The campaign's problem dimensions."""
        return self.ctx.shape

    @property
    def device(self) -> dict[str, Any] | None:
        """The device measured on."""
        return self.ctx.device

    @property
    def tolerance(self) -> float:
        """The campaign's correctness tolerance."""
        return self.ctx.tolerance

    @property
    def incumbent(self) -> HistoryItem | None:
        """The point the moves start from."""
        return self.ctx.incumbent

    @property
    def history(self) -> list[HistoryItem]:
        """Every candidate so far."""
        return self.ctx.history

    @property
    def stagnation(self) -> int:
        """Evaluations since the last acceptance."""
        return self.ctx.stagnation

    @property
    def other_shapes(self) -> tuple[Any, ...]:
        """What the campaign's shape set found at its other shapes, nearest first (their bests,
        what each transform paid there: :class:`agent.policies.base.ShapeOutcome`)."""
        return self.ctx.other_shapes

    def action_allowed(self, name: str) -> bool:
        """Whether a transform may be used in this campaign."""
        return self.ctx.action_allowed(name)

    def theoretical_occupancy(self, threads: int, regs_per_thread: int,
                              shared_mem_bytes: int) -> float:
        """Theoretical occupancy (% of an SM's warps) on the campaign's device."""
        return theoretical_occupancy(threads, regs_per_thread, shared_mem_bytes,
                                     self.ctx.device or {})[0]
