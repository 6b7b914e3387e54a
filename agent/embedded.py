"""Embedded mode: the campaign driver's plans carried out by threads of one process.

The driver (:mod:`agent.driver`) decides exactly as in the service; this module is its other
delivery. Each evaluator (a GPU's isolated child, or a replay) has a thread that takes the
candidates the plans send to compile, compiles them in a shared pool ahead of the one it
measures, and runs every step with the plain functions of ``worker/jobs.py`` that the Celery
workers run: take the candidate, compile, record the compile (serving its measurement from the
history when the evaluation was made before), take it for its evaluation, measure (the
incumbent interleaved), then report to the driver, whose next plan it carries out.

A campaign keeps ``parallel`` candidates in flight (the driver's rule), spread over the
evaluators: each thread holds at most ``ceil(parallel / evaluators)`` of them, one measuring
and the rest compiling ahead. Database transactions are serialized by one lock (SQLite allows
one writer), and decisions by the campaign's row lock as in the service.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from sqlalchemy.orm import Session, sessionmaker

from agent import driver
from agent.driver import Plan
from agent.policies import make_policy
from agent.policies.base import Policy, SearchSpace
from agent.spaces import FullSpace, ReplaySpace
from core.evaluation import CompileResult, Evaluator, Measurement
from core.models import Campaign
from core.settings import get_settings
from kernels import get_family
from worker import jobs

#: called with the campaign (as committed) after each candidate's result is recorded
ProgressFn = Callable[[Campaign], None]
T = TypeVar("T")


class LocalFleet:
    """The evaluators of this process as the driver sees them: as many candidates in flight as
    the campaign's ``parallel`` asks (compiled ahead in the pool), the policy and space given
    to the runner or the campaign's own, the device of the first evaluator."""

    def __init__(self, evaluators: list[Evaluator], *, policy: Policy | None,
                 space: SearchSpace | None, settings: Any) -> None:
        self.evaluators = evaluators
        self.settings = settings
        self._policy = policy
        self._space = space
        self._spaces: dict[str, SearchSpace] = {}

    def slots(self, session: Session, campaign: Campaign) -> int:
        """Every candidate ``parallel`` asks for: the pool compiles ahead what waits."""
        return max(1, campaign.parallel)

    def policy(self, campaign: Campaign) -> Policy:
        """The runner's policy, else the campaign's."""
        if self._policy is None:
            self._policy = make_policy(campaign.policy, self.settings)
        return self._policy

    def space(self, campaign: Campaign) -> SearchSpace:
        """The runner's space, else the replay's measured points or every valid point."""
        if self._space is not None:
            return self._space
        key = f"{campaign.kernel} {campaign.shape_text}"
        if key not in self._spaces:
            ev = self.evaluators[0]
            family = get_family(campaign.kernel)
            dataset = getattr(ev, "dataset", None)
            self._spaces[key] = (ReplaySpace(family, dataset, campaign.shape_text)
                                 if ev.backend == "replay" and dataset is not None
                                 else FullSpace(family, campaign.arch))
        return self._spaces[key]

    def prepare(self, session: Session, campaign: Campaign) -> str | None:
        """The first evaluator's device, when the campaign has none yet; a replay without the
        campaign's shape cannot run it."""
        try:
            self.space(campaign)
        except ValueError as exc:
            return f"{campaign.backend} backend: {exc}"
        if campaign.device is None and self.evaluators:
            campaign.device = dict(self.evaluators[0].device)
            campaign.gpu_name = campaign.device.get("name")
        return None


class EmbeddedRunner:
    """Runs one campaign to its end with the given evaluators, through the campaign driver."""

    def __init__(self, sessions: sessionmaker[Session], evaluators: list[Evaluator], *,
                 policy: Policy | None = None, space: SearchSpace | None = None,
                 settings: Any = None, on_progress: ProgressFn | None = None) -> None:
        self.sessions = sessions
        self.settings = settings or get_settings()
        self.fleet = LocalFleet(evaluators, policy=policy, space=space, settings=self.settings)
        self.runtimes = [jobs.WorkerRuntime.local(self.settings, ev) for ev in evaluators]
        self.on_progress = on_progress
        #: serializes this process's transactions (tests take it to inject actions)
        self.lock = threading.RLock()
        self.errors: list[BaseException] = []
        self._to_compile: deque[str] = deque()
        self._to_evaluate: deque[str] = deque()
        self._stop = threading.Event()
        self._gated: set[str] = set()
        #: what this process's claims name (``claimed_by``)
        self.node = jobs.worker_name("embedded")

    # -- the steps ------------------------------------------------------------------------------
    def _step(self, fn: Callable[[Session], T]) -> T:
        """One transaction, committed (the process's transactions one at a time)."""
        with self.lock, self.sessions.begin() as s:
            return fn(s)

    def _take(self, plan: Plan) -> None:
        """Queue a plan's steps; the compute-sanitizer gate runs at once (the campaign is
        done)."""
        with self.lock:
            self._to_compile.extend(c for c in plan.compile if c not in self._to_compile)
            self._to_evaluate.extend(c for c, _q in plan.evaluate
                                     if c not in self._to_evaluate)
        for candidate_id, _queue in plan.sanitize:
            self._sanitize(candidate_id)

    def _sanitize(self, candidate_id: str) -> None:
        with self.lock:
            if candidate_id in self._gated:
                return  # another thread's plan asked for it too
            self._gated.add(candidate_id)
        job = self._step(lambda s: jobs.start_sanitize(s, candidate_id, self.node))
        if job is None:
            return
        record = jobs.run_sanitize(self.runtimes[0], job)
        self._step(lambda s: driver.on_sanitized(s, candidate_id, record))

    def run_set(self, set_id: str) -> list[Campaign]:
        """Run a shape set's members to their ends, one after another (the driver gives each
        its share of the set's budget and its transferred points as it starts)."""
        from agent.shapesets import members

        with self.sessions() as s:
            ids = [m.id for m in members(s, set_id)]
        done = []
        for campaign_id in ids:
            done.append(self.run(campaign_id))
            if self.errors:
                break
        return done

    def run(self, campaign_id: str) -> Campaign:
        """Start the campaign if queued, then carry out its plans until it ends."""
        self._take(self._step(lambda s: driver.decide(s, campaign_id, self.fleet)))
        with self.sessions() as s:
            campaign = s.get(Campaign, campaign_id)
            assert campaign is not None
            depth = max(1, math.ceil(campaign.parallel / max(1, len(self.runtimes))))
        workers = max(1, depth * len(self.runtimes))
        with ThreadPoolExecutor(workers, thread_name_prefix="compile") as pool:
            threads = [threading.Thread(target=self._guarded, daemon=True,
                                        args=(campaign_id, rt, pool, depth),
                                        name=f"evaluator-{i}")
                       for i, rt in enumerate(self.runtimes)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        with self.sessions() as s:
            campaign = s.get(Campaign, campaign_id)
            assert campaign is not None
            return campaign

    def _guarded(self, campaign_id: str, runtime: jobs.WorkerRuntime, pool: ThreadPoolExecutor,
                 depth: int) -> None:
        try:
            self._loop(campaign_id, runtime, pool, depth)
        except BaseException as exc:  # recorded: the campaign is marked failed, not hung
            self.errors.append(exc)
            self._stop.set()
            reason = f"internal error: {exc!r}"
            self._step(lambda s: driver.fail(s, campaign_id, reason))

    # -- one evaluator's thread -----------------------------------------------------------------
    def _next_to_compile(self, campaign_id: str) -> str | None:
        """A candidate sent to compile and taken by no thread; else the driver tops the
        campaign up and one of the new ones (None: nothing to take now)."""
        with self.lock:
            if not self._to_compile:
                self._take(self._step(lambda s: driver.decide(s, campaign_id, self.fleet)))
            return self._to_compile.popleft() if self._to_compile else None

    def _next_to_evaluate(self) -> str | None:
        """A compiled candidate that no thread holds (its compile was recorded elsewhere)."""
        with self.lock:
            return self._to_evaluate.popleft() if self._to_evaluate else None

    def _start_compile(self, cid: str) -> jobs.CompileJob | None:
        return self._step(lambda s: jobs.start_compile(s, cid, self.node))

    def _loop(self, campaign_id: str, runtime: jobs.WorkerRuntime, pool: ThreadPoolExecutor,
              depth: int) -> None:
        held: deque[tuple[str, jobs.CompileJob | None, Future[CompileResult] | None]] = deque()
        while not self._stop.is_set():
            while len(held) < depth:
                compiled = self._next_to_evaluate()
                if compiled is not None:  # measured before what this thread compiles
                    held.appendleft((compiled, None, None))
                    continue
                cid = self._next_to_compile(campaign_id)
                if cid is None:
                    break
                job = self._start_compile(cid)
                if job is not None:
                    held.append((cid, job, pool.submit(jobs.run_compile, runtime, job)))
            if not held:
                if self._finished(campaign_id):
                    return
                # another thread holds a result the next proposal depends on
                time.sleep(0.02)
                continue
            cid, job, future = held.popleft()
            plan = self._carry_on(cid, job, future.result() if future is not None else None,
                                  runtime)
            self._take(plan)
            self._progress(campaign_id)

    def _carry_on(self, cid: str, job: jobs.CompileJob | None, result: CompileResult | None,
                  runtime: jobs.WorkerRuntime) -> Plan:
        """Record the compile; measure a compiled candidate; the driver's next plan."""
        if job is not None and result is not None:
            if result.status != "ok":
                return self._step(lambda s: driver.on_compiled(s, cid, result, self.fleet))
            served = self._step(lambda s: self._record_compiled(s, cid, job, result))
            if served is not None:  # the history held this evaluation: recorded, no GPU
                return served
        evaluation = self._step(lambda s: jobs.start_evaluation(s, cid, self.node))
        if evaluation is None:
            return Plan()  # recorded already
        try:
            m = jobs.run_evaluation(runtime, evaluation)
        except Exception as exc:  # a failure of the candidate is a recorded status
            m = Measurement("crashed", error=f"evaluation error: {exc!r}"[:500])
        return self._step(lambda s: driver.on_measured(s, cid, m, self.fleet))

    def _record_compiled(self, s: Session, cid: str, job: jobs.CompileJob,
                         result: CompileResult) -> Plan | None:
        """Record a successful compile with the key of its evaluation; when the team's history
        holds that evaluation, record it as served and the driver's next plan, in the same
        transaction (None: the candidate is to be measured)."""
        key, served = jobs.evaluation_of(s, job, result)
        jobs.record_compiled(s, job, result, key)
        if served is None:
            return None
        return driver.on_measured(s, cid, served, self.fleet)

    def _finished(self, campaign_id: str) -> bool:
        with self.sessions() as s:
            campaign = s.get(Campaign, campaign_id)
            return campaign is None or campaign.status != "running"

    def _progress(self, campaign_id: str) -> None:
        if self.on_progress is None:
            return
        with self.sessions() as s:
            campaign = s.get(Campaign, campaign_id)
            assert campaign is not None
            self.on_progress(campaign)
