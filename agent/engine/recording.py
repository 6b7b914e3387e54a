"""Results recorded (idempotent: a redelivered result finds its candidate finished), the
decision on each (:mod:`agent.engine.acceptance`), the feedback record, and the budget check
that may end the campaign.
"""

from __future__ import annotations

import math
from typing import Any

from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session, load_only

from agent.engine.acceptance import Decision, accept
from agent.engine.history import HISTORY, candidate_for_record, in_flight
from agent.engine.lifecycle import budget_left, finish_campaign
from agent.engine.locking import CampaignError, emit, lock_campaign
from core.candidates import compile_columns
from core.evaluation import CompileResult, Measurement
from core.feedback import FeedbackRecord
from core.models import Campaign, Candidate, utcnow
from core.statuses import CANDIDATE_IN_FLIGHT
from kernels import get_family

#: What recording a successful compile reads of the campaign.
COMPILE_RECORD_LOAD = load_only(Campaign.id, Campaign.kernel, Campaign.arch)


_AVG_US = select(Candidate.avg_us, Candidate.iteration, Candidate.params_key.label("key")).where(
    Candidate.id == bindparam("candidate_id"))
#: the iteration of the campaign's candidate at a point (the incumbent a result ran beside)
_ITERATION_OF_KEY = select(Candidate.iteration).where(
    Candidate.campaign_id == bindparam("campaign_id"), Candidate.params_key == bindparam("key"))


def record_compile(session: Session, candidate_id: str, result: CompileResult) -> Candidate:
    """Store the compile figures (idempotent); a failed compile is the candidate's outcome."""
    cand = candidate_for_record(session, candidate_id)
    if cand is None:
        raise CampaignError(f"no candidate {candidate_id}")
    if cand.status not in ("pending", "compiling"):
        return cand  # a redelivered task: the result is already there
    campaign = session.get(Campaign, cand.campaign_id, options=[COMPILE_RECORD_LOAD])
    assert campaign is not None
    for name, value in compile_columns(campaign.kernel, campaign.arch, result).items():
        setattr(cand, name, value)
    if result.status == "ok":
        cand.status = "compiled"
        cand.claimed_by = None
        return cand
    status = result.failure_status or "compile_error"
    _finalize(session, cand.campaign_id, cand, status,
              Measurement(status, error=result.error))
    return cand


def record_measurement(session: Session, candidate_id: str, m: Measurement) -> Candidate:
    """Store the measurement (idempotent), decide, check the budget."""
    cand = candidate_for_record(session, candidate_id)
    if cand is None:
        raise CampaignError(f"no candidate {candidate_id}")
    if cand.status not in CANDIDATE_IN_FLIGHT:
        return cand
    _finalize(session, cand.campaign_id, cand, m.status, m)
    return cand


def record_failure(session: Session, candidate_id: str, status: str, error: str) -> Candidate:
    """A candidate whose evaluation could not complete (e.g. it killed its worker twice)."""
    return record_measurement(session, candidate_id, Measurement(status, error=error))


def _decide(m: Measurement, *, threshold_pct: float, first: bool,
            incumbent_us: float | None, incumbent: str | None = None,
            interleaved: bool = True) -> Decision:
    """The acceptance rule applied to a measurement: its figures as plain numbers
    (``interleaved`` False: its incumbent runs are of another candidate than the incumbent
    it is decided against, so only that one's recorded time counts)."""
    perf = m.perf if m.status == "ok" and m.perf else None
    failure = m.error
    if m.status == "wrong" and m.correctness:
        failure = m.correctness.get("reason") or failure
    return accept(float(perf["avg_us"]) if perf else None,
                  (perf.get("runs_us") or ()) if perf else (),
                  status=m.status, failure=failure, first=first, threshold_pct=threshold_pct,
                  incumbent_runs_us=(m.incumbent_runs_us or ()) if interleaved else (),
                  incumbent_us=incumbent_us, incumbent=incumbent)


def _finished(session: Session, campaign_id: str, candidate_id: str) -> Any:
    """What a decision reads of a finished candidate: its ``avg_us`` and ``iteration`` (the
    history's cached item where this process has read it)."""
    return HISTORY.final_item(session, campaign_id, candidate_id) or \
        session.execute(_AVG_US, {"candidate_id": candidate_id}).first()


def _against(session: Session, campaign: Campaign, cand: Candidate, m: Measurement,
             incumbent: Any) -> tuple[str | None, bool, str]:
    """How the decision on ``cand`` names the incumbent it compares with (the campaign's
    incumbent now, ``incumbent``), whether the measurement's interleaved runs are of that one,
    and what the reason adds when it is not the incumbent the candidate was proposed from
    (its parent) or measured against: with several candidates in flight, another result may
    have replaced the incumbent meanwhile, and a figure against the new one read beside the
    parent's looks wrong unless it says so."""
    if incumbent is None:
        return None, True, ""
    name = f"incumbent #{incumbent.iteration}"
    measured = m.incumbent_key if m.incumbent_runs_us else None
    interleaved = measured is None or measured == incumbent.key
    notes = []
    if not interleaved:
        was = session.execute(_ITERATION_OF_KEY, {"campaign_id": campaign.id,
                                                  "key": measured}).scalar()
        notes.append(f"it was measured beside #{was if was is not None else '?'}, replaced "
                     "before its result came: decided on the new incumbent's recorded time")
    if cand.parent_id and cand.parent_id != campaign.incumbent_id:
        parent = _finished(session, campaign.id, cand.parent_id)
        mine = float(m.perf["avg_us"]) if m.status == "ok" and m.perf else None
        if parent is not None and parent.avg_us and mine:
            notes.append(f"{parent.avg_us / mine:.3f}x its parent #{parent.iteration}'s "
                         "recorded speed, the incumbent when it was proposed")
        elif parent is not None:
            notes.append(f"proposed from #{parent.iteration}, the incumbent then")
    return name, interleaved, "".join(f"; {n}" for n in notes)


def _finalize(session: Session, campaign_id: str, cand: Candidate, status: str,
              m: Measurement) -> None:
    campaign = lock_campaign(session, campaign_id)
    incumbent: Any = None  # what the decision reads of the incumbent: avg_us, iteration
    if campaign.incumbent_id:
        incumbent = _finished(session, campaign.id, campaign.incumbent_id)
    cand.status = status
    cand.claimed_by = None  # the step is over: no worker holds the candidate any more
    cand.correctness = m.correctness
    cand.perf = m.perf
    cand.profile = m.profile
    cand.error = m.error
    cand.gpu_seconds = m.gpu_seconds
    cand.served_from = m.served_from
    cand.incumbent_runs = ({"key": m.incumbent_key, "runs_us": list(m.incumbent_runs_us)}
                           if m.incumbent_key and m.incumbent_runs_us else None)
    cand.avg_us = float(m.perf["avg_us"]) if m.perf and status == "ok" else None
    cand.finished_at = utcnow()
    name, interleaved, note = _against(session, campaign, cand, m, incumbent)
    decision = _decide(m, threshold_pct=campaign.accept_threshold_pct, first=incumbent is None,
                       incumbent_us=incumbent.avg_us if incumbent is not None else None,
                       incumbent=name, interleaved=interleaved).as_dict()
    if incumbent is not None and status == "ok":
        decision["reason"] = (decision["reason"] + note)[:500]
        decision["incumbent_id"] = campaign.incumbent_id
        decision["incumbent_iteration"] = incumbent.iteration
    cand.decision = decision
    cand.accepted = bool(decision["accepted"])
    campaign.evaluations += 1
    campaign.gpu_seconds += m.gpu_seconds
    if cand.accepted:
        campaign.incumbent_id = cand.id
        campaign.last_accept_iteration = cand.iteration
        if campaign.best_us is None or (cand.avg_us or math.inf) < campaign.best_us:
            campaign.best_id = cand.id
            campaign.best_us = cand.avg_us
    if cand.iteration == 0:
        campaign.baseline_id = cand.id
        if status != "ok":
            finish_campaign(session, campaign, "failed",
                            f"the baseline did not pass: {decision['reason']}")
    cand.feedback = build_feedback(campaign, cand)
    emit(session, campaign.id, "result", {
        "candidate_id": cand.id, "iteration": cand.iteration, "action": cand.action,
        "status": status, "avg_us": cand.avg_us,
        "throughput": (m.perf or {}).get("throughput") if status == "ok" else None,
        "unit": (m.perf or {}).get("unit") if status == "ok" else None,
        "decision": decision, "best_us": campaign.best_us, "best_id": campaign.best_id,
        "evaluations": campaign.evaluations, "served_from": m.served_from,
    })
    if campaign.status == "running":
        left, spent = budget_left(campaign)
        if spent is not None and in_flight(session, campaign.id) == 0:
            finish_campaign(session, campaign, "done", spent)


def build_feedback(campaign: Campaign, cand: Candidate) -> dict[str, Any]:
    """The feedback record, validated against :class:`FeedbackRecord`
    (docs/ARCHITECTURE.md#the-feedback-record)."""
    family = get_family(campaign.kernel)
    compile_block = dict(cand.compile or {
        "seconds": 0.0, "max_smem_limit": family.max_smem_limit(campaign.arch)})
    compile_status = compile_block.pop("status", None) or (
        "ok" if cand.status not in ("rejected", "compile_error", "compile_timeout") else "error")
    best_rate = family.metric.rate(campaign.problem, campaign.best_us)
    best = {"candidate_id": campaign.best_id, "avg_us": campaign.best_us,
            "throughput": round(best_rate, 4) if best_rate else None,
            "unit": family.metric.unit,
            "rank_est": rank_estimate(campaign.leaderboard, campaign.best_us, best_rate)}
    if family.metric.kind == "flops":  # the seed's field
        best["throughput_tflops"] = best["throughput"]
    record = FeedbackRecord.model_validate({
        "iteration": cand.iteration, "campaign_id": campaign.id, "candidate_id": cand.id,
        "parent_id": cand.parent_id, "action_taken": cand.action, "params": cand.params,
        "status": cand.status, "compile_status": compile_status, "compile": compile_block,
        "correctness": cand.correctness, "perf": cand.perf, "profile": cand.profile,
        "decision": cand.decision,
        "best_so_far": best,
        "device": campaign.device, "backend": campaign.backend, "error": cand.error,
    })
    return record.model_dump(mode="json")


def rank_estimate(leaderboard: list[Any] | None, best_us: float | None,
                  best_rate: float | None) -> int | None:
    """Rank the best kernel would take in ``leaderboard``: entries in µs, or dicts with
    ``avg_us``/``us``, or a ``throughput`` in the family's unit (``tflops`` for a flops
    metric) compared with ``best_rate``."""
    if not leaderboard or best_us is None:
        return None
    faster = 0
    for entry in leaderboard:
        if isinstance(entry, dict):
            rate = entry.get("throughput", entry.get("tflops"))
            if rate is not None:
                faster += best_rate is not None and float(rate) > best_rate
                continue
            entry = entry.get("avg_us", entry.get("us"))
        if entry is not None and float(entry) < best_us:
            faster += 1
    return faster + 1
