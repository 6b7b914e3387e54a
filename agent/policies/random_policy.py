"""The control: uniform random points of the search space, never one already explored."""

from __future__ import annotations

from agent.policies.base import PolicyContext, Proposal


class RandomPolicy:
    """Random search, seeded by the campaign and the iteration (replayable)."""

    name = "random"

    def propose(self, ctx: PolicyContext, n: int) -> list[Proposal]:
        """Up to ``n`` distinct unexplored points drawn uniformly."""
        parent = ctx.incumbent.id if ctx.incumbent else None
        return [Proposal(params, "random_point()", "uniform random sample of the space",
                         self.name, parent)
                for params in ctx.sample_unexplored(ctx.rng(salt=31), n, set())]
