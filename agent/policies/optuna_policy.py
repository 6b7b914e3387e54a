"""TPE over the numeric knobs (Optuna), rebuilt from the campaign's history at every call.

Rebuilding keeps the policy stateless (the Celery agent and embedded mode decide alike); with at
most a few hundred trials it costs milliseconds.
"""

from __future__ import annotations

import logging
from dataclasses import fields
from typing import Any

from agent.policies.base import PolicyContext, Proposal, key_of

FAIL_PENALTY = 10.0  # failed points are told as this many times the worst time seen


class OptunaPolicy:
    """Optuna's TPE sampler over every field of the parameter space."""

    name = "optuna"

    def propose(self, ctx: PolicyContext, n: int) -> list[Proposal]:
        """Up to ``n`` fresh points asked from a TPE study fed with the history."""
        import optuna
        from optuna.distributions import BaseDistribution, CategoricalDistribution

        optuna.logging.set_verbosity(logging.WARNING)
        # the knobs with a domain (a specialized shape is no knob: its fields have none)
        names = [f.name for f in fields(ctx.family.params_type) if f.name in ctx.space.domains]
        others = [f.name for f in fields(ctx.family.params_type)
                  if f.name not in ctx.space.domains]
        dists: dict[str, BaseDistribution] = {
            name: CategoricalDistribution(list(ctx.space.domains[name])) for name in names
        }
        sampler = optuna.samplers.TPESampler(seed=ctx.seed * 7919 + ctx.iteration,
                                             multivariate=True, n_startup_trials=10)
        study = optuna.create_study(direction="minimize", sampler=sampler)
        times = [h.avg_us for h in ctx.history if h.avg_us is not None]
        worst = max(times) if times else 1.0
        for h in ctx.history:
            p = {f.name: getattr(h.params, f.name) for f in fields(h.params)}
            if any(p[name] not in ctx.space.domains[name] for name in names) or any(
                    p[name] != getattr(ctx.family.baseline, name) for name in others):
                continue
            if h.status in ("pending", "compiling", "compiled", "measuring"):
                continue
            value = h.avg_us if h.status == "ok" and h.avg_us else worst * FAIL_PENALTY
            study.add_trial(optuna.trial.create_trial(
                params={name: p[name] for name in names}, distributions=dists, value=value))
        out: list[Proposal] = []
        seen: set[str] = set()
        explored = ctx.explored
        for _ in range(60 * max(n, 1)):
            trial = study.ask(dists)
            params = ctx.family.params_type(**trial.params).canonical()
            key = key_of(params)
            if key in explored or key in seen or not ctx.fresh(params):
                # tell TPE this region is known so that it moves on
                study.tell(trial, _known_value(ctx, key, worst))
                continue
            seen.add(key)
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            out.append(Proposal(params, "optuna_tpe()", "TPE sample over the numeric knobs",
                                self.name, ctx.incumbent.id if ctx.incumbent else None))
            if len(out) >= n:
                break
        if len(out) < n:
            # TPE keeps drawing around what it knows: late in a campaign all its draws can be
            # explored points (a 300-evaluation replay campaign stopped at 159, 2337 points
            # left). The rest of the batch is uniform over the unexplored points instead, so
            # the campaign spends its budget; the reason says so.
            out += [Proposal(params, "random_point()", "TPE drew only explored points: a uniform "
                             "random unexplored one instead", self.name,
                             ctx.incumbent.id if ctx.incumbent else None)
                    for params in ctx.sample_unexplored(ctx.rng(salt=57), n - len(out), seen)]
        return out


def _known_value(ctx: PolicyContext, key: str, worst: float) -> Any:
    for h in ctx.history:
        if h.key == key and h.avg_us is not None:
            return h.avg_us
    return worst * FAIL_PENALTY
