"""The agent's incremental history (``agent.engine.history.HistoryCache``) against a full read,
on Postgres.

Two caches stand for two agent processes deciding for the same campaign; compile and GPU workers
move candidates along in their own transactions. After every step, what each cache returns must
equal :func:`agent.engine.history.history` (a full read of the candidates), and the decisions
made from a cache must be the decisions made from full reads.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agent.engine import history, lifecycle, locking, proposing, recording
from agent.policies import make_policy
from agent.policies.base import HistoryItem
from agent.service import space_for
from core.db import session_scope
from core.models import Candidate
from core.settings import Settings
from core.statuses import CANDIDATE_FINAL, CANDIDATE_IN_FLIGHT
from worker import jobs

SHAPE = "4096x4096x4096"


@pytest.fixture(scope="module")
def runtime() -> Iterator[jobs.WorkerRuntime]:
    """A replay GPU worker's runtime, in this process."""
    rt = jobs.WorkerRuntime(Settings(backend="replay"), "gpu")
    yield rt
    rt.close()


def _campaign(url: str, *, policy: str, parallel: int, budget: int, seed: int) -> str:
    """A running replay campaign with its baseline pending."""
    with session_scope(url) as s:
        campaign_id = lifecycle.create_campaign(s, lifecycle.CampaignSpec(
            policy=policy, parallel=parallel, budget_iterations=budget, seed=seed),
            backend="replay").id
    with session_scope(url) as s:
        lifecycle.start_campaign(s, campaign_id)
    return campaign_id


def _compile(url: str, rt: jobs.WorkerRuntime, candidate_id: str) -> str:
    """A compile worker's delivery, then the agent's record of it; the candidate's status."""
    with session_scope(url) as s:
        job = jobs.start_compile(s, candidate_id)
    assert job is not None
    result = jobs.run_compile(rt, job)
    with session_scope(url) as s:
        return recording.record_compile(s, candidate_id, result).status


def _measure(url: str, rt: jobs.WorkerRuntime, candidate_id: str) -> jobs.Measurement:
    """A GPU worker's delivery (the candidate is ``measuring`` once this returns)."""
    with session_scope(url) as s:
        job = jobs.start_evaluation(s, candidate_id)
    assert job is not None
    return jobs.run_evaluation(rt, job)


def _decide(url: str, campaign_id: str, cache: history.HistoryCache | None, top_up_to: int
            ) -> list[str]:
    """One agent decision (``cache`` None: from a full read); the new candidates' ids."""
    with session_scope(url) as s:
        campaign = locking.lock_campaign(s, campaign_id)
        created = proposing.propose_candidates(
            s, campaign_id, policy=make_policy(campaign.policy),
            space=space_for(campaign.kernel, campaign.arch, campaign.backend, SHAPE),
            top_up_to=top_up_to, cache=cache)
        return [c.id for c in created]


def _record(url: str, campaign_id: str, candidate_id: str, m: jobs.Measurement,
            cache: history.HistoryCache, top_up_to: int) -> list[str]:
    """``agent.measured``: record the result and decide, in one transaction."""
    with session_scope(url) as s:
        recording.record_measurement(s, candidate_id, m)
        campaign = locking.lock_campaign(s, campaign_id)
        created = proposing.propose_candidates(
            s, campaign_id, policy=make_policy(campaign.policy),
            space=space_for(campaign.kernel, campaign.arch, campaign.backend, SHAPE),
            top_up_to=top_up_to, cache=cache)
        return [c.id for c in created]


def _both(url: str, campaign_id: str, cache: history.HistoryCache
          ) -> tuple[list[HistoryItem], list[HistoryItem]]:
    """What the cache returns, and a full read, in one transaction (committed)."""
    with session_scope(url) as s:
        campaign = locking.lock_campaign(s, campaign_id)
        return cache.read(s, campaign), history.history(s, campaign)


def _statuses(items: list[HistoryItem]) -> dict[str, str]:
    return {h.id: h.status for h in items}


def test_cache_equals_a_full_read_while_other_processes_write(
        service_db: str, runtime: jobs.WorkerRuntime) -> None:
    url = service_db
    a, b = history.HistoryCache(), history.HistoryCache()  # two agent processes
    cid = _campaign(url, policy="expert", parallel=4, budget=60, seed=5)
    with session_scope(url) as s:
        baseline = s.query(Candidate.id).filter(Candidate.campaign_id == cid).scalar()
    _compile(url, runtime, baseline)
    m = _measure(url, runtime, baseline)
    _record(url, cid, baseline, m, b, top_up_to=4)  # B records the baseline and proposes 4

    got, full = _both(url, cid, a)  # A's first read: everything
    assert got == full
    assert len(full) == 5
    first = _statuses(full)
    proposed = [h.id for h in full if h.status == "pending"]
    assert len(proposed) == 4

    # the compile workers take A's four; B records two results and proposes their successors;
    # a GPU worker takes a third
    compiled = [c for c in proposed if _compile(url, runtime, c) == "compiled"]
    assert len(compiled) >= 3, "this seed's proposals should mostly compile"
    for cand in compiled[:2]:
        _record(url, cid, cand, _measure(url, runtime, cand), b, top_up_to=4)
    running = _measure(url, runtime, compiled[2])
    got, full = _both(url, cid, a)
    assert got == full
    now = _statuses(full)
    assert len(full) > 5, "B's successors are in A's read"
    assert all(now[c] in CANDIDATE_FINAL for c in compiled[:2])
    assert now[compiled[2]] == "measuring"
    assert sum(first[i] != now[i] for i in first) >= 3

    # A records a result and decides, then its transaction rolls back: the cache keeps nothing
    # of it (the candidate is still in flight, its successor does not exist)
    rows = len(full)

    def record_then_fail() -> None:
        with session_scope(url) as s:
            recording.record_measurement(s, compiled[2], running)
            campaign = locking.lock_campaign(s, cid)
            assert _statuses(a.read(s, campaign))[compiled[2]] in CANDIDATE_FINAL  # inside
            assert proposing.propose_candidates(
                s, cid, policy=make_policy("expert"),
                space=space_for(campaign.kernel, campaign.arch, campaign.backend, SHAPE),
                top_up_to=4, cache=a)
            raise RuntimeError("rolled back")

    with pytest.raises(RuntimeError, match="rolled back"):
        record_then_fail()
    got, full = _both(url, cid, a)
    assert got == full
    assert _statuses(full)[compiled[2]] == "measuring"
    assert len(full) == rows

    # then the campaign to its end, A and B taking turns, checked at every step
    turn = 0
    while True:
        with session_scope(url) as s:
            pending = [c.id for c in s.query(Candidate).filter(
                Candidate.campaign_id == cid, Candidate.status.in_(CANDIDATE_IN_FLIGHT))
                .order_by(Candidate.iteration)]
        if not pending:
            break
        cache = (a, b)[turn % 2]
        cand = pending[0]
        with session_scope(url) as s:
            status = s.get(Candidate, cand).status  # type: ignore[union-attr]
        if status in ("pending", "compiling"):
            status = _compile(url, runtime, cand)
        if status in ("compiled", "measuring"):
            _record(url, cid, cand, _measure(url, runtime, cand), cache, top_up_to=4)
        else:  # a failed compile ended it: the agent decides
            _decide(url, cid, cache, top_up_to=4)
        for each in (a, b):
            got, full = _both(url, cid, each)
            assert got == full, f"step {turn}: the cache diverged from a full read"
        turn += 1
    assert len(full) == 60
    before = a.rows_read
    got, full = _both(url, cid, a)
    assert got == full
    assert a.rows_read == before, "a read of a finished campaign decoded rows again"


def test_decisions_from_the_cache_are_the_decisions_from_full_reads(
        service_db: str, runtime: jobs.WorkerRuntime) -> None:
    url = service_db

    def run(cache: history.HistoryCache | None) -> list[tuple[str | None, str]]:
        cid = _campaign(url, policy="expert", parallel=1, budget=50, seed=11)
        while True:
            with session_scope(url) as s:
                cand = s.query(Candidate).filter(
                    Candidate.campaign_id == cid, Candidate.status == "pending").first()
                cand_id = cand.id if cand is not None else None
            if cand_id is None:
                break
            if _compile(url, runtime, cand_id) == "compiled":
                with session_scope(url) as s:
                    recording.record_measurement(s, cand_id, _measure(url, runtime, cand_id))
            _decide(url, cid, cache, top_up_to=1)
        with session_scope(url) as s:
            return [(c.action, c.params_key) for c in s.query(Candidate).filter(
                Candidate.campaign_id == cid).order_by(Candidate.iteration)]

    cached = run(history.HistoryCache())
    full = run(None)
    assert len(full) == 50
    assert cached == full
