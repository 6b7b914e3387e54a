"""GPU workers report the seconds they spend on evaluations (utilization, idle fraction)."""

from __future__ import annotations

import time

from core.db import session_scope
from core.models import WorkerHeartbeat
from core.settings import Settings
from service.service_stack import Stack, TeamKey, wait_finished, wait_until
from worker import jobs

SHAPE = {"m": 4096, "n": 4096, "k": 4096}
SESSION_START = time.monotonic()  # the stack starts after this module is imported


def test_heartbeats_add_up_the_busy_seconds(service_db: str) -> None:
    rt = jobs.WorkerRuntime(Settings(backend="replay"), "gpu")
    rt.count_evaluation(0.5)
    rt.count_evaluation(0.25)
    assert rt.take_evaluations() == (2, 0.75)
    assert rt.take_evaluations() == (0, 0.0)
    name = f"gpu@test:{time.monotonic_ns()}"
    for done, busy in ((2, 0.75), (1, 0.5)):
        with session_scope(service_db) as s:
            jobs.heartbeat(s, name=name, role="gpu", backend="replay", gpu=None,
                           evaluations=done, busy_s=busy)
    with session_scope(service_db) as s:
        row = s.get(WorkerHeartbeat, name)
        assert row is not None
        assert (row.evaluations, row.busy_seconds) == (3, 1.25)
        s.delete(row)


def test_gpu_workers_report_their_busy_time(stack: Stack, team_a: TeamKey) -> None:
    with stack.client(team_a.key, operator=True) as client:
        cid = client.post("/campaigns", json={"shape": SHAPE, "budget": {"iterations": 8},
                                              "parallel": 2}).json()["id"]
        wait_finished(client, cid, stack=stack)

        def reported() -> bool:  # the next heartbeat carries the last evaluations
            gpus = [w for w in client.get("/workers").json() if w["role"] == "gpu"]
            return sum(w["evaluations"] for w in gpus) >= 8 and all(
                (w["busy_seconds"] > 0) == (w["evaluations"] > 0) for w in gpus)

        wait_until(reported, 10, "the GPU workers' heartbeats", stack)
        gpus = [w for w in client.get("/workers").json() if w["role"] == "gpu"]
    # busy for part of its life: more than nothing, less than the time since it started
    assert all(0 < w["busy_seconds"] < time.monotonic() - SESSION_START
               for w in gpus if w["evaluations"])


def test_compile_workers_report_their_compiles(stack: Stack, team_a: TeamKey) -> None:
    """GET /workers showed a compile worker with 0 evaluations and 0 busy seconds after any
    number of compiles (only GPU workers and agents counted theirs)."""
    with stack.client(team_a.key, operator=True) as client:
        before = sum(w["evaluations"] for w in client.get("/workers").json()
                     if w["role"] == "compile")
        cid = client.post("/campaigns", json={"shape": SHAPE, "budget": {"iterations": 6}}
                          ).json()["id"]
        wait_finished(client, cid, stack=stack)

        def reported() -> bool:  # the next heartbeat carries the last compiles
            workers = [w for w in client.get("/workers").json() if w["role"] == "compile"]
            return sum(w["evaluations"] for w in workers) >= before + 6

        wait_until(reported, 15, "the compile workers' heartbeats", stack)
        workers = [w for w in client.get("/workers").json() if w["role"] == "compile"]
    assert all(w["busy_seconds"] > 0 for w in workers if w["evaluations"])
