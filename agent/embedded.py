"""Embedded mode: the engine's steps run in one process.

One thread per evaluator (GPU or replay). Each keeps one candidate compiling ahead in the nvcc pool
while it measures the current one, so compile overlaps measurement; decisions are serialized by a
lock (and by the campaign row lock on databases that have one).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from agent.engine import lifecycle, proposing, recording
from agent.policies.base import Policy, SearchSpace
from core.candidates import mark_status
from core.evaluation import CompileResult, EvalOptions, Evaluator
from core.models import Campaign, Candidate
from kernels import get_family

ProgressFn = Callable[[Campaign, Candidate | None], None]


class EmbeddedRunner:
    """Runs one campaign to its end with the given evaluators."""

    def __init__(self, sessions: sessionmaker[Session], evaluators: list[Evaluator], *,
                 policy: Policy, space: SearchSpace, settings: Any = None,
                 on_progress: ProgressFn | None = None, lookahead: int = 1) -> None:
        self.sessions = sessions
        self.evaluators = evaluators
        self.policy = policy
        self.space = space
        self.settings = settings
        self.on_progress = on_progress
        self.lookahead = lookahead
        self.lock = threading.RLock()
        self.errors: list[BaseException] = []

    def run(self, campaign_id: str) -> Campaign:
        """Start the campaign if queued, then evaluate until it ends."""
        with self.lock, self.sessions.begin() as s:
            lifecycle.start_campaign(s, campaign_id)
        threads = [threading.Thread(target=self._guarded, args=(campaign_id, ev), daemon=True,
                                    name=f"evaluator-{i}")
                   for i, ev in enumerate(self.evaluators)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        with self.sessions() as s:
            campaign = s.get(Campaign, campaign_id)
            assert campaign is not None
            if self.errors and campaign.status == "running":
                with self.sessions.begin() as s2:
                    c2 = s2.get(Campaign, campaign_id)
                    assert c2 is not None
                    lifecycle.finish_campaign(s2, c2, "failed",
                                              f"internal error: {self.errors[0]!r}"[:500])
                campaign = s.get(Campaign, campaign_id, populate_existing=True)
                assert campaign is not None
            return campaign

    def _guarded(self, campaign_id: str, evaluator: Evaluator) -> None:
        try:
            self._loop(campaign_id, evaluator)
        except BaseException as exc:  # recorded: the campaign is marked failed, not hung
            self.errors.append(exc)

    # -- one evaluator's loop ------------------------------------------------------------------
    def _claim(self, campaign_id: str) -> list[tuple[str, Any, int]]:
        """Pending candidates nobody has taken yet, else fresh proposals."""
        with self.lock, self.sessions.begin() as s:
            campaign = s.get(Campaign, campaign_id, populate_existing=True)
            assert campaign is not None
            if campaign.status != "running":
                return []
            family = get_family(campaign.kernel)
            pending = list(s.query(Candidate).filter(
                Candidate.campaign_id == campaign_id, Candidate.status == "pending"
            ).order_by(Candidate.iteration).limit(1))
            if not pending:
                pending = proposing.propose_candidates(s, campaign_id, policy=self.policy,
                                                       space=self.space, slots=1,
                                                       settings=self.settings)
            out = []
            for cand in pending:
                mark_status(s, cand.id, "compiling")
                out.append((cand.id, family.params_from_dict(cand.params), cand.iteration))
            return out

    def _loop(self, campaign_id: str, ev: Evaluator) -> None:
        queue: deque[tuple[str, Any, int, Future[CompileResult]]] = deque()
        while True:
            while len(queue) <= self.lookahead:
                claimed = self._claim(campaign_id)
                if not claimed:
                    break
                for cid, params, iteration in claimed:
                    queue.append((cid, params, iteration, ev.compile(params)))
            if not queue:
                with self.sessions() as s:
                    campaign = s.get(Campaign, campaign_id)
                    assert campaign is not None
                    if campaign.status != "running":
                        return
                # another evaluator holds a result the next proposal depends on (or the engine
                # ends the campaign on the next claim when nothing is left)
                time.sleep(0.02)
                continue
            cid, params, iteration, future = queue.popleft()
            compiled = future.result()
            with self.lock, self.sessions.begin() as s:
                cand = recording.record_compile(s, cid, compiled)
                ok = cand.status == "compiled"
                if ok:
                    mark_status(s, cid, "measuring")
                campaign = s.get(Campaign, campaign_id)
                assert campaign is not None
                shape = campaign.problem
                seed = campaign.seed
                options = dataclasses.replace(getattr(ev, "options", None) or EvalOptions(),
                                              tolerance=campaign.tolerance,
                                              profile=campaign.profile)
                inc = s.get(Candidate, campaign.incumbent_id) if campaign.incumbent_id else None
                inc_params = (get_family(campaign.kernel).params_from_dict(inc.params)
                              if inc is not None and inc.id != cid else None)
                inc_id = inc.id if inc_params is not None and inc is not None else None
            if ok:
                incumbent = None
                if inc_params is not None:
                    inc_compiled = ev.compile(inc_params).result()
                    if inc_compiled.status == "ok":
                        incumbent = (inc_params, inc_compiled)
                m = ev.measure(params, compiled, shape=shape, iteration=iteration, seed=seed,
                               options=options, incumbent=incumbent)
                if incumbent is not None:  # which candidate its interleaved runs are of
                    m = dataclasses.replace(m, incumbent_id=inc_id)
                with self.lock, self.sessions.begin() as s:
                    recording.record_measurement(s, cid, m)
            self._progress(campaign_id, cid)

    def _progress(self, campaign_id: str, candidate_id: str) -> None:
        if self.on_progress is None:
            return
        with self.sessions() as s:
            campaign = s.get(Campaign, campaign_id)
            cand = s.get(Candidate, candidate_id)
            assert campaign is not None
            self.on_progress(campaign, cand)
