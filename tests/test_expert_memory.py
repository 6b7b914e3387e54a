"""The expert policy's memory between decisions changes its cost, never its proposals.

Campaigns run on the replay through the engine as the service runs them (record a result and
decide in one transaction, ``parallel`` candidates in flight; ``replay_support.drive``), once
with the stateless search of commit 9500f39 (``expert_reference``) and once with the policy as it
is, in the ways a service uses it: one agent process, two processes taking turns (each behind
the other by a few decisions), a process restarted mid-campaign, one process deciding for two
campaigns at once, and decisions rolled back after the policy saw their history. Every proposal
(point, action, reason, parent) must be the same, in the same order.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from expert_reference import ReferenceExpertPolicy
from replay_support import create, drive, new_database, proposals

from agent.policies import make_policy
from agent.policies.base import Policy
from agent.policies.expert import ExpertPolicy

#: enough decisions to spend the incumbent's neighbourhood and search the whole history's
BUDGET = 250


def _run(tmp_path: Path, specs: list[tuple[int, int]], policy_for: Callable[[int], Policy],
         rollback_every: int = 0) -> list[list[tuple[Any, ...]]]:
    """Proposals of campaigns (seed, parallel) run side by side with these policies."""
    _url, sessions = new_database(tmp_path)
    ids = [create(sessions, seed=seed, parallel=parallel, budget_iterations=BUDGET)
           for seed, parallel in specs]
    parallel = {p for _s, p in specs}
    assert len(parallel) == 1, "campaigns run side by side share one parallel setting"
    drive(sessions, ids, policy_for, parallel=parallel.pop(), rollback_every=rollback_every)
    return [proposals(sessions, cid) for cid in ids]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory
              ) -> Callable[[int, int], list[tuple[Any, ...]]]:
    """The stateless search's proposals for (seed, parallel), computed once per module."""
    found: dict[tuple[int, int], list[tuple[Any, ...]]] = {}
    stateless = ReferenceExpertPolicy()

    def get(seed: int, parallel: int) -> list[tuple[Any, ...]]:
        if (seed, parallel) not in found:
            found[seed, parallel] = _run(tmp_path_factory.mktemp("reference"),
                                         [(seed, parallel)], lambda _i: stateless)[0]
        return found[seed, parallel]

    return get


def _starts(rows: list[tuple[Any, ...]]) -> set[str]:
    return {r[3].split(":")[0] for r in rows if (r[3] or "").startswith("local search from #")}


@pytest.mark.slow
@pytest.mark.parametrize(("seed", "parallel"), [(0, 1), (3, 4)])
def test_one_process_proposes_what_the_stateless_search_proposes(
        tmp_path: Path, reference: Callable[[int, int], list[tuple[Any, ...]]],
        seed: int, parallel: int) -> None:
    want = reference(seed, parallel)
    policy = ExpertPolicy()
    got = _run(tmp_path, [(seed, parallel)], lambda _i: policy)[0]
    assert len(want) == BUDGET
    # the run reached every part of the search: two-step walks, and the neighbourhoods of
    # many evaluated points (not only the incumbents and the top three)
    assert any("two-step" in (r[3] or "") for r in want)
    assert len(_starts(want)) >= 6
    assert got == want
    assert policy.memories_built == 1  # one memory, brought up to date at every decision


@pytest.mark.slow
@pytest.mark.parametrize(("seed", "parallel"), [(0, 1), (3, 4)])
def test_agent_processes_taking_turns_propose_the_same(
        tmp_path: Path, reference: Callable[[int, int], list[tuple[Any, ...]]],
        seed: int, parallel: int) -> None:
    processes = [ExpertPolicy(), ExpertPolicy(), ExpertPolicy()]
    turns = random.Random(seed)  # runs of turns: each process falls behind the others
    owner = [0]

    def policy_for(_step: int) -> Policy:
        if turns.random() < 0.3:
            owner[0] = turns.randrange(len(processes))
        return processes[owner[0]]

    assert _run(tmp_path, [(seed, parallel)], policy_for)[0] == reference(seed, parallel)
    assert all(p.memories_built == 1 for p in processes)


@pytest.mark.slow
def test_a_restarted_process_rebuilds_its_memory_from_the_history(
        tmp_path: Path, reference: Callable[[int, int], list[tuple[Any, ...]]]) -> None:
    lives: dict[int, ExpertPolicy] = {}

    def policy_for(step: int) -> Policy:
        return lives.setdefault(step // 60, ExpertPolicy())  # a new process every 60 steps

    assert _run(tmp_path, [(0, 1)], policy_for)[0] == reference(0, 1)
    assert len(lives) >= 4


@pytest.mark.slow
def test_one_process_decides_for_two_campaigns_at_once(
        tmp_path: Path, reference: Callable[[int, int], list[tuple[Any, ...]]]) -> None:
    policy = make_policy("expert")
    first, second = _run(tmp_path, [(0, 1), (1, 1)], lambda _i: policy)
    assert first == reference(0, 1)
    assert second == reference(1, 1)


@pytest.mark.slow
@pytest.mark.parametrize(("seed", "parallel"), [(0, 1), (3, 4)])
def test_a_decision_rolled_back_after_the_policy_saw_it_is_not_remembered(
        tmp_path: Path, reference: Callable[[int, int], list[tuple[Any, ...]]],
        seed: int, parallel: int) -> None:
    policy = ExpertPolicy()
    got = _run(tmp_path, [(seed, parallel)], lambda _i: policy, rollback_every=9)[0]
    assert got == reference(seed, parallel)
    # each rolled-back step had recorded a result the policy saw finished: read afresh
    assert policy.memories_built > BUDGET // 9 // 2


def test_make_policy_shares_the_expert_of_the_process() -> None:
    assert make_policy("expert") is make_policy("expert")
