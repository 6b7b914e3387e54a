"""The expert policy's search as it is computed without keeping anything between decisions:
payoffs, rankings and neighbourhoods all recomputed from the whole history at every decision
(the code of commit 9500f39, less the block-shape tabu dropped on 2026-11-30). The
profile-driven rules (``_ruled``) are the policy's own, inherited.

It is the oracle of ``tests/test_expert_memory.py``: the policy must propose exactly what this
class proposes, from the same contexts. Slow by design (its decision grows with the history).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from itertools import chain

from agent.policies.base import HistoryItem, PolicyContext, Proposal, key_of, take_unique
from agent.policies.expert import ExpertPolicy, local_search_reason
from kernels.base import Rejection


def _payoffs(ctx: PolicyContext) -> dict[str, tuple[float, int]]:
    sums: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    for h in ctx.history:
        if h.action is None or h.improvement_pct is None:
            continue
        name = h.action.split("(")[0]
        sums[name] += max(min(h.improvement_pct, 50.0), -50.0)
        counts[name] += 1
    return {k: (sums[k] / counts[k], counts[k]) for k in counts}


class ReferenceExpertPolicy(ExpertPolicy):
    """The stateless search (see the module docstring)."""

    def propose(self, ctx: PolicyContext, n: int) -> list[Proposal]:
        """What the policy proposes, computed from the history alone."""
        if ctx.incumbent is None:
            return []
        payoffs = _payoffs(ctx)
        out = list(self._ruled(ctx))
        out += self._ref_local_search(ctx, ctx.incumbent, payoffs)
        if ctx.stagnation >= self.stagnation_window:
            out += self._ref_two_step(ctx)
        if ctx.stagnation >= 3 * self.stagnation_window or not out:
            for item in self._ref_top(ctx, 3):
                out += self._ref_local_search(ctx, item, payoffs)
        return take_unique(chain(out, self._ref_everywhere(ctx, payoffs)), n)

    def _ref_local_search(self, ctx: PolicyContext, start: HistoryItem,
                          payoffs: dict[str, tuple[float, int]]) -> list[Proposal]:
        scored = []
        rng = ctx.rng(salt=len(ctx.history))
        settled = self._settled(ctx)
        for action, params in ctx.neighbours(start):
            if action.name == "specialize_shape" and action.args[0] and not settled:
                continue
            mean, count = payoffs.get(action.name, (0.0, 0))
            bonus = 1.0 / (1 + count)
            scored.append((mean + bonus + rng.random() * 0.01, action, params))
        scored.sort(key=lambda t: -t[0])
        return [Proposal(params, str(action),
                         local_search_reason(start.iteration, action.name,
                                             payoffs.get(action.name, (0.0, 0))),
                         self.name, start.id)
                for _, action, params in scored]

    def _ref_two_step(self, ctx: PolicyContext) -> list[Proposal]:
        inc = ctx.incumbent
        assert inc is not None
        rng = ctx.rng(salt=97)
        firsts = list(ctx.family.transforms)
        out: list[Proposal] = []
        explored = ctx.explored
        for _ in range(200):
            node = ctx.point(inc.params)
            steps = []
            for _step in range(2):
                spec = rng.choice(firsts)
                if spec.name == "revert_last" or not ctx.action_allowed(spec.name):
                    break
                actions = [a for a in spec.actions() if ctx.in_domains(spec, a)]
                if not actions:
                    break
                action = rng.choice(actions)
                result = ctx.family.apply(node, action)
                if isinstance(result, Rejection):
                    break
                node = result
                steps.append(str(action))
            if len(steps) == 2 and key_of(node.params) not in explored and ctx.fresh(node.params):
                out.append(Proposal(node.params, " ; ".join(steps),
                                    f"stagnation ({ctx.stagnation} evaluations without an "
                                    "acceptance): two-step move", self.name, inc.id))
            if len(out) >= 8:
                break
        return out

    def _ref_everywhere(self, ctx: PolicyContext,
                        payoffs: dict[str, tuple[float, int]]) -> Iterator[Proposal]:
        for item in self._ref_top(ctx, len(ctx.history)):
            yield from self._ref_local_search(ctx, item, payoffs)

    @staticmethod
    def _ref_top(ctx: PolicyContext, k: int) -> list[HistoryItem]:
        ok = [h for h in ctx.history if h.status == "ok" and h.avg_us is not None]
        return sorted(ok, key=lambda h: h.avg_us or 0.0)[:k]

