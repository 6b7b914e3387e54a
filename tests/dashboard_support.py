"""A team's replay campaign in an SQLite file, for the dashboard, report and export tests.

The campaign runs through the real embedded loop on the shipped H200 replay dataset (its SIMT
sub-space measured whole, `ReplayDataset.complete_space`). Every point of
that dataset passed, so :class:`FaultyReplay` turns some evaluations into the failures a GPU gives
(compile error, wrong answer, crash, timeout): the plots and exports must show every status.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import Future
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import httpx
from ports import free_port, listens
from repo import ROOT
from sqlalchemy.orm import Session, sessionmaker

from agent.embedded import EmbeddedRunner
from agent.engine import lifecycle
from agent.policies import make_policy
from agent.spaces import ReplaySpace
from api import security
from core.db import session_factory, upgrade_database
from core.evaluation import CompileResult, EvalOptions, Measurement
from core.replay import ReplayDataset
from kernels import get_family
from kernels.base import Dims
from kernels.gemm_bias_relu.shape import Shape
from worker.evaluate import ReplayEvaluator

SHAPE = "4096x4096x4096"
_SCRIPT = Path(sys.executable).with_name("tuneforge")
TUNEFORGE = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "cli.main"]
#: iteration -> the failure recorded instead of the replayed measurement
FAILURES = {3: "crashed", 5: "wrong", 9: "timeout", 12: "crashed", 16: "wrong"}
#: what a GPU worker records when the evaluation child dies in pycuda: the raw Python text
CHILD_DEATH = ("evaluation process died (exit 1): Traceback (most recent call last):\n"
               '  File "/srv/tuneforge/worker/gpu_child.py", line 561, in evaluate\n'
               "    ctx.synchronize()\n"
               "pycuda._driver.LogicError: cuStreamSynchronize failed: an illegal memory access "
               "was encountered (injected by the test)")
#: iteration -> the error recorded with it, where it is not ``"<status> (injected by the test)"``
FAILURE_ERRORS = {12: CHILD_DEATH}


class FaultyReplay(ReplayEvaluator):
    """The replay, except for the failures of :data:`FAILURES` and a compile error for one
    point in eleven (by the hash of its parameters, so the incumbent never fails)."""

    def __init__(self, *args: Any, delay_s: float = 0.0, faults: bool = True,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.delay_s = delay_s
        self.faults = faults

    def compile(self, params: Any) -> Future[CompileResult]:
        if not self.faults:
            return super().compile(params)
        digest = int(hashlib.sha256(repr(sorted(params.to_dict().items())).encode())
                     .hexdigest(), 16)
        if params != self.family.baseline and digest % 11 == 3:
            future: Future[CompileResult] = Future()
            future.set_result(CompileResult("error", 0.41, error="ptxas error: entry function "
                                            "uses too much shared data (injected by the test)",
                                            log="ptxas error (injected by the test)\n"))
            return future
        return super().compile(params)

    def measure(self, params: Any, compiled: CompileResult, *, shape: Dims, iteration: int,
                seed: int, options: EvalOptions | None = None, incumbent: Any = None,
                verify: bool = False) -> Measurement:
        if self.delay_s:
            time.sleep(self.delay_s)
        failure = FAILURES.get(iteration) if self.faults else None
        if failure == "wrong":
            return Measurement("wrong", correctness={
                "passed": False, "tolerance": 1e-4, "rel_err": 0.31, "max_abs_err": 12.5,
                "max_scaled_err": 0.02, "reason": "rel_err 3.1e-01 > 1e-04 (injected)",
                "cases": []}, gpu_seconds=0.2)
        if failure is not None:
            return Measurement(failure, error=FAILURE_ERRORS.get(
                iteration, f"{failure} (injected by the test)"), gpu_seconds=0.5)
        return super().measure(params, compiled, shape=shape, iteration=iteration, seed=seed,
                               options=options, incumbent=incumbent, verify=verify)


@dataclass
class TeamDb:
    """An SQLite database with one team."""

    url: str
    sessions: sessionmaker[Session]
    team_id: str
    key: str


def team_database(path: Path, team: str = "dashboard-team") -> TeamDb:
    """A migrated SQLite file at ``path`` with a team and its key."""
    url = f"sqlite:///{path}"
    upgrade_database(url)
    sessions = session_factory(url)
    with sessions.begin() as s:
        row, key = security.create_team(s, name=team)
        team_id = row.id
    return TeamDb(url=url, sessions=sessions, team_id=team_id, key=key)


def create_campaign(db: TeamDb, *, budget: int = 40, policy: str = "expert",
                    reuse: bool = True) -> str:
    """A queued replay campaign of the team at 4096³ (``reuse=False``: measured afresh, none
    of its evaluations served from the team's earlier campaigns, whose failures
    :class:`FaultyReplay` injected)."""
    family = get_family("gemm_bias_relu")
    ev = ReplayEvaluator(family, ReplayDataset(family.replay_datasets()[0]).complete_space())
    with db.sessions.begin() as s:
        campaign = lifecycle.create_campaign(
            s, lifecycle.CampaignSpec(parallel=2, kernel="gemm_bias_relu",
                                      dims={"m": 4096, "n": 4096, "k": 4096},
                                      policy=policy, budget_iterations=budget, seed=0,
                                      team_id=db.team_id, reuse=reuse),
            backend="replay", device=ev.device, vendor_us=ev.vendor_us(Shape.parse(SHAPE)))
        return campaign.id


def run_campaign(db: TeamDb, campaign_id: str, *, policy: str = "expert",
                 delay_s: float = 0.0, faults: bool = True) -> None:
    """Run a created campaign to its end, with the failures of :class:`FaultyReplay` (none
    with ``faults=False``)."""
    family = get_family("gemm_bias_relu")
    dataset = ReplayDataset(family.replay_datasets()[0]).complete_space()
    ev = FaultyReplay(family, dataset, delay_s=delay_s, faults=faults)
    runner = EmbeddedRunner(db.sessions, [ev], policy=make_policy(policy),
                            space=ReplaySpace(family, dataset, SHAPE))
    runner.run(campaign_id)
    assert not runner.errors, runner.errors


@dataclass
class Server:
    """``tuneforge serve`` over an SQLite file, as a subprocess."""

    url: str
    proc: subprocess.Popen[bytes]
    log: Path

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 10 s."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def start_server(db_url: str, home: Path, log: Path) -> Server:
    """Start the API on a free loopback port and wait until it answers, from that process (a
    port taken by another server in the meantime: again on another port)."""
    env = {**os.environ, "TUNEFORGE_DATABASE_URL": db_url, "TUNEFORGE_HOME": str(home)}
    for _ in range(3):
        port = free_port()
        with log.open("wb") as out:
            proc = subprocess.Popen([*TUNEFORGE, "serve", "--host", "127.0.0.1", "--port",
                                     str(port)], env=env, cwd=ROOT, stdout=out,
                                    stderr=subprocess.STDOUT)
        server = Server(url=f"http://127.0.0.1:{port}", proc=proc, log=log)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                if "address already in use" in log.read_text(errors="replace"):
                    break
                raise RuntimeError(f"tuneforge serve exited {proc.returncode}: "
                                   f"{log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{server.url}/ui/", timeout=2).status_code == 200 \
                        and listens(proc.pid, port):
                    return server
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        else:
            server.stop()
            raise RuntimeError(f"tuneforge serve did not answer in 60 s: "
                               f"{log.read_text()[-2000:]}")
    raise RuntimeError(f"tuneforge serve found its port taken three times: "
                       f"{log.read_text()[-2000:]}")


@lru_cache(maxsize=1)
def finished_campaign(root: Path) -> tuple[TeamDb, str]:
    """One finished 40-evaluation campaign with failures in a new database under ``root`` (a
    folder of the caller's own: a server may hold the file open)."""
    root.mkdir(parents=True, exist_ok=True)
    db = team_database(root / "dashboard.db")
    campaign_id = create_campaign(db, budget=40)
    run_campaign(db, campaign_id)
    return db, campaign_id
