"""Two deliveries of one result recorded at the same moment (two agent processes; a report sent
again after its worker was given up for dead) give one result: the second waits for the first's
locks and then finds the candidate finished. Real Postgres, two connections."""

from __future__ import annotations

import threading
import time

from sqlalchemy import func, select

from agent.engine import lifecycle, recording
from core.candidates import mark_status
from core.db import session_factory, session_scope
from core.models import Campaign, Candidate, Event
from kernels import get_family
from kernels.gemm_bias_relu.shape import Shape
from worker.evaluate import ReplayEvaluator
from worker.jobs import replay_dataset


def test_a_result_recorded_twice_at_once_is_recorded_once(service_db: str) -> None:
    family = get_family("gemm_bias_relu")
    evaluator = ReplayEvaluator(family, replay_dataset("gemm_bias_relu"))
    with session_scope(service_db) as s:
        campaign = lifecycle.create_campaign(s, lifecycle.CampaignSpec(budget_iterations=5),
                                             backend="replay")
        (baseline,) = lifecycle.start_campaign(s, campaign.id)
        params = family.params_from_dict(baseline.params)
        compiled = evaluator.compile(params).result()
        recording.record_compile(s, baseline.id, compiled)
        mark_status(s, baseline.id, "measuring")
        campaign_id, candidate_id = campaign.id, baseline.id
    measurement = evaluator.measure(params, compiled, shape=campaign_shape(service_db,
                                                                           campaign_id),
                                    iteration=0, seed=0)

    first = session_factory(service_db)()
    recording.record_measurement(first, candidate_id, measurement)  # holds the locks
    first.flush()
    second_done = threading.Event()

    def second() -> None:
        with session_scope(service_db) as s:
            recording.record_measurement(s, candidate_id, measurement)
        second_done.set()

    thread = threading.Thread(target=second)
    thread.start()
    time.sleep(0.5)
    assert not second_done.is_set()  # it waits for the first's locks
    first.commit()
    first.close()
    thread.join(30)
    assert second_done.is_set()
    with session_scope(service_db) as s:
        results = s.scalar(select(func.count()).select_from(Event).where(
            Event.campaign_id == campaign_id, Event.kind == "result"))
        found = s.get(Campaign, campaign_id)
        cand = s.get(Candidate, candidate_id)
        assert found is not None
        assert cand is not None
        evaluations, status = found.evaluations, cand.status
    assert (results, evaluations) == (1, 1)
    assert status == measurement.status


def campaign_shape(db_url: str, campaign_id: str) -> Shape:
    with session_scope(db_url) as s:
        c = s.get(Campaign, campaign_id)
        assert c is not None
        return Shape.of(c.problem)
