"""The control: uniform random points of the search space, never one already explored."""

from __future__ import annotations

from agent.policies.base import PolicyContext, Proposal, key_of


class RandomPolicy:
    """Random search, seeded by the campaign and the iteration (replayable)."""

    name = "random"

    def propose(self, ctx: PolicyContext, n: int) -> list[Proposal]:
        """Up to ``n`` distinct unexplored points drawn uniformly."""
        explored = ctx.explored
        rng = ctx.rng(salt=31)
        out: list[Proposal] = []
        seen: set[str] = set()
        # draw more than needed: some draws are explored already
        for params in ctx.space.sample(rng, n + len(explored) + 16):
            key = key_of(params)
            if key in explored or key in seen or not ctx.fresh(params):
                continue
            seen.add(key)
            out.append(Proposal(params, "random_point()", "uniform random sample of the space",
                                self.name, ctx.incumbent.id if ctx.incumbent else None))
            if len(out) >= n:
                break
        return out
