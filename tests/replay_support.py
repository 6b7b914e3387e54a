"""Helpers for the agent tests: embedded campaigns on the shipped H200 replay dataset (its
sub-space measured whole, ``ReplayDataset.complete_space``).

Every campaign runs through the real loop (``EmbeddedRunner``, the engine, ``ReplayEvaluator``)
on an SQLite file whose schema comes from the Alembic migrations.
"""

from __future__ import annotations

import shutil
import statistics
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from agent.embedded import EmbeddedRunner
from agent.engine import history, lifecycle, locking, proposing, recording
from agent.policies import make_policy
from agent.policies.base import HistoryItem, Policy, PolicyContext, key_of
from agent.spaces import ReplaySpace
from core.db import session_factory, upgrade_database
from core.models import Campaign, Candidate, Event
from core.replay import ReplayDataset
from core.statuses import CANDIDATE_IN_FLIGHT
from kernels import get_family
from worker.evaluate import ReplayEvaluator

SHAPE = "4096x4096x4096"


@dataclass(frozen=True)
class Replay:
    """The family, the dataset and its search space."""

    family: Any
    dataset: ReplayDataset
    space: ReplaySpace

    def row(self, params: Any) -> dict[str, Any]:
        """The dataset's measurement of a point (which must be in the dataset)."""
        from kernels.gemm_bias_relu.shape import Shape

        found = self.dataset.get(params.to_dict() if hasattr(params, "to_dict") else params,
                                 Shape.parse(SHAPE))
        assert found is not None, f"{params} is not in the replay dataset"
        return found

    def avg_us(self, params: Any) -> float:
        """Recorded median time of a point."""
        return float(self.row(params)["perf"]["avg_us"])


@lru_cache(maxsize=1)
def replay() -> Replay:
    """Loaded once per test process (the dataset is read-only)."""
    family = get_family("gemm_bias_relu")
    # the SIMT sub-space measured whole: these tests hold the engine to decisions on it (the
    # campaigns' tensor-core rows merged later are the CLI's and the service's replay)
    dataset = ReplayDataset(family.replay_datasets()[0]).complete_space()
    ReplayEvaluator(family, dataset)  # keys the rows by the family's canonical parameters
    return Replay(family, dataset, ReplaySpace(family, dataset, SHAPE))


_TEMPLATE: dict[str, Path] = {}


def new_database(tmp_path: Path) -> tuple[str, sessionmaker[Session]]:
    """A fresh SQLite file with the migrated schema (migrated once, then copied)."""
    if "db" not in _TEMPLATE or not _TEMPLATE["db"].exists():
        template = tmp_path.parent / f"schema-template-{id(_TEMPLATE)}.db"
        upgrade_database(f"sqlite:///{template}")
        _TEMPLATE["db"] = template
    path = tmp_path / "tuneforge.db"
    shutil.copyfile(_TEMPLATE["db"], path)
    url = f"sqlite:///{path}"
    return url, session_factory(url)


def create(sessions: sessionmaker[Session], **spec: Any) -> str:
    """Insert a queued replay campaign at 4096³; returns its id."""
    rp = replay()
    evaluator = ReplayEvaluator(rp.family, rp.dataset)
    spec.setdefault("budget_iterations", 20)
    spec.setdefault("parallel", 2)  # as ``tuneforge tune`` on a replay: one compiled ahead
    with sessions.begin() as s:
        campaign = lifecycle.create_campaign(s, lifecycle.CampaignSpec(**spec), backend="replay",
                                             device=evaluator.device,
                                             vendor_us=evaluator.vendor_us(_shape()))
        return campaign.id


def _shape() -> Any:
    from kernels.gemm_bias_relu.shape import Shape

    return Shape.parse(SHAPE)


ProgressHook = Callable[[EmbeddedRunner, Campaign], None]


def run(sessions: sessionmaker[Session], campaign_id: str, *, policy: Policy | None = None,
        hook: ProgressHook | None = None) -> Campaign:
    """Run a created campaign to its end in embedded mode with one replay evaluator (the
    campaign's ``parallel`` candidates in flight)."""
    rp = replay()
    with sessions() as s:
        name = s.get(Campaign, campaign_id).policy  # type: ignore[union-attr]
    runner: EmbeddedRunner | None = None

    def on_progress(camp: Campaign) -> None:
        if hook is not None and runner is not None:
            hook(runner, camp)

    runner = EmbeddedRunner(sessions, [ReplayEvaluator(rp.family, rp.dataset)],
                            policy=policy or make_policy(name), space=rp.space,
                            on_progress=on_progress)
    campaign = runner.run(campaign_id)
    assert not runner.errors, runner.errors
    return campaign


def campaign_of(sessions: sessionmaker[Session], campaign_id: str) -> Campaign:
    """The campaign row as it is now."""
    with sessions() as s:
        campaign = s.get(Campaign, campaign_id)
        assert campaign is not None
        return campaign


def candidates(sessions: sessionmaker[Session], campaign_id: str) -> list[Candidate]:
    """Every candidate, by iteration."""
    with sessions() as s:
        return list(s.scalars(select(Candidate).where(Candidate.campaign_id == campaign_id)
                              .order_by(Candidate.iteration)))


def events(sessions: sessionmaker[Session], campaign_id: str) -> list[Event]:
    """Every event, in the order it was written."""
    with sessions() as s:
        return list(s.scalars(select(Event).where(Event.campaign_id == campaign_id)
                              .order_by(Event.id)))


def decision_chain(sessions: sessionmaker[Session], campaign_id: str) -> list[tuple[Any, ...]]:
    """What a user reads back: iteration, action, point, status, decision, parent iteration."""
    rows = candidates(sessions, campaign_id)
    iteration_of = {c.id: c.iteration for c in rows}
    return [(c.iteration, c.action, c.params_key, c.status, c.accepted,
             (c.decision or {}).get("reason"), iteration_of.get(c.parent_id or ""))
            for c in rows]


class _RolledBack(Exception):
    """Raised inside a step's transaction to roll it back on purpose."""


def drive(sessions: sessionmaker[Session], campaign_ids: list[str],
          policy_for: Callable[[int], Policy], *, parallel: int = 1,
          rollback_every: int = 0) -> int:
    """Run created campaigns to their ends as the service does, deterministically, in one
    thread: each step records the result of a campaign's oldest candidate in flight (compile,
    then measurement against the incumbent, from the replay) and decides in the same
    transaction, keeping ``parallel`` candidates in flight. Campaigns take turns step by step;
    step ``i`` decides with ``policy_for(i)`` (one policy object per agent process). With
    ``rollback_every`` = k, every k-th step is first run with another reading of the
    measurement (twice as fast) and rolled back, then run again with the dataset's: the policy
    saw a history that never committed. Returns the number of steps."""
    rp = replay()
    evaluator = ReplayEvaluator(rp.family, rp.dataset)
    with sessions.begin() as s:
        for cid in campaign_ids:
            lifecycle.start_campaign(s, cid)
    running = list(campaign_ids)
    step = 0
    while running:
        for cid in list(running):
            attempts = 2 if rollback_every and step % rollback_every == rollback_every - 1 else 1
            for attempt in range(attempts):
                try:
                    with sessions.begin() as s:
                        more = _step(s, cid, evaluator, policy_for(step), parallel,
                                     faster=attempt + 1 < attempts)
                        if attempt + 1 < attempts:
                            raise _RolledBack
                except _RolledBack:
                    continue
            if not more:
                running.remove(cid)
            step += 1
    return step


def _step(s: Session, campaign_id: str, evaluator: ReplayEvaluator, policy: Policy,
          parallel: int, *, faster: bool = False) -> bool:
    rp = replay()
    campaign = locking.lock_campaign(s, campaign_id)
    oldest = s.scalars(select(Candidate).where(
        Candidate.campaign_id == campaign_id, Candidate.status.in_(CANDIDATE_IN_FLIGHT))
        .order_by(Candidate.iteration).limit(1)).first()
    if oldest is not None:
        params = rp.family.params_from_dict(oldest.params)
        compiled = evaluator.compile(params).result()
        if recording.record_compile(s, oldest.id, compiled).status == "compiled":
            incumbent = None
            if campaign.incumbent_id and campaign.incumbent_id != oldest.id:
                found = s.get(Candidate, campaign.incumbent_id)
                assert found is not None
                inc_params = rp.family.params_from_dict(found.params)
                incumbent = (inc_params, evaluator.compile(inc_params).result())
            measured = evaluator.measure(params, compiled, shape=_shape(),
                                         iteration=oldest.iteration, seed=campaign.seed,
                                         incumbent=incumbent)
            if faster and measured.perf:
                measured = replace(measured, perf={
                    **measured.perf, "avg_us": measured.perf["avg_us"] / 2,
                    "runs_us": [r / 2 for r in measured.perf["runs_us"]]})
            recording.record_measurement(s, oldest.id, measured)
    proposing.propose_candidates(s, campaign_id, policy=policy, space=rp.space,
                                 top_up_to=parallel)
    return campaign.status == "running" or history.in_flight(s, campaign_id) > 0


def proposals(sessions: sessionmaker[Session], campaign_id: str) -> list[tuple[Any, ...]]:
    """What the policy proposed, in order: iteration, action, point, reason, parent."""
    rows = candidates(sessions, campaign_id)
    iteration_of = {c.id: c.iteration for c in rows}
    return [(c.iteration, c.action, c.params_key, c.reason, iteration_of.get(c.parent_id or ""))
            for c in rows]


def run_campaign(tmp_path: Path, **spec: Any) -> tuple[sessionmaker[Session], str, Campaign]:
    """New database, new campaign, run to its end."""
    _url, sessions = new_database(tmp_path)
    cid = create(sessions, **spec)
    return sessions, cid, run(sessions, cid)


# ---- policy contexts without a database ---------------------------------------------------------
def item(params: Any, iteration: int, *, parent: HistoryItem | None = None,
         action: str | None = None, accepted: bool = False,
         avg_us: float | None = None) -> HistoryItem:
    """A finished candidate as a policy sees it, timed from the dataset."""
    rp = replay()
    params = params.canonical()
    us = avg_us if avg_us is not None else rp.avg_us(params)
    row = rp.row(params)
    return HistoryItem(id=f"c{iteration}", iteration=iteration, params=params,
                       key=key_of(params), status="ok", action=action,
                       parent_id=parent.id if parent else None, avg_us=us, accepted=accepted,
                       compile=row.get("compile"), profile=row.get("profile"))


def context(history: list[HistoryItem], incumbent: HistoryItem, *, seed: int = 0,
            stagnation: int = 0, **kw: Any) -> PolicyContext:
    """A policy context over the replay space."""
    rp = replay()
    return PolicyContext(family=rp.family, space=rp.space, arch="sm_90", incumbent=incumbent,
                         history=history, seed=seed, iteration=len(history),
                         threshold_pct=0.5, stagnation=stagnation, **kw)


def walk(actions: list[str]) -> list[HistoryItem]:
    """A history from the baseline, each action accepted (each point must be in the dataset)."""
    rp = replay()
    from kernels.base import Candidate as Point

    node = Point(rp.family.baseline)
    items = [item(rp.family.baseline, 0, accepted=True)]
    for i, text in enumerate(actions, start=1):
        result = rp.family.apply(node, text)
        assert not hasattr(result, "reason"), result
        node = result
        items.append(item(node.params, i, parent=items[-1], action=text, accepted=True))
    return items


def with_block(params: Any, x: int, y: int) -> Any:
    """The same point with another thread-block shape."""
    return replace(params, block_x=x, block_y=y).canonical()


def interleaved_improvement(cand_runs: list[float], inc_runs: list[float]) -> tuple[float, bool]:
    """What the engine computes: % improvement of the candidate's median over the incumbent's
    interleaved median, and whether every candidate run beats every incumbent run."""
    inc = statistics.median(inc_runs)
    cand = statistics.median(cand_runs)
    return 100.0 * (inc - cand) / inc, max(cand_runs) < min(inc_runs)
