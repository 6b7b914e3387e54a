"""The campaign driver: the one place that decides what a campaign does next.

Every function here runs inside one transaction that holds the campaign's row lock and returns
a :class:`Plan`: the candidate ids whose next step must be carried out once that transaction
has committed. Two deliveries carry plans out, and neither decides anything:

- the service: Celery tasks (``agent/tasks.py`` sends the plan, ``worker/tasks.py`` runs the
  compile and GPU steps);
- embedded mode: threads in one process (``agent/embedded.py``).

Both run each step with the same plain functions of ``worker/jobs.py`` and report back through
:func:`on_compiled` and :func:`on_measured`. What differs between them is a :class:`Fleet`:
how many candidates the machines behind the delivery can work on at once, the policy and the
search space of a campaign, and the device a queued campaign starts on.

``parallel`` is the number of candidates a campaign keeps in flight (proposed and not yet
finished: compiling, compiled, measuring), whichever delivery runs it; the driver tops a
campaign up to ``min(parallel, fleet.slots(...))``, one proposal at a time, so that each
proposal sees the ones before it in flight exactly as a decision made after each result would.

Idempotence. Every plan is re-derived from the database (pending candidates need a compile,
compiled ones an evaluation), so a step run twice sends nothing a second time that the
delivery's guards have not seen.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from agent import library, shapesets
from agent import sanitize as sanitize_gate
from agent.engine import history, lifecycle, locking, proposing, recording
from agent.policies.base import Policy, SearchSpace
from core.arch import gpu_queue
from core.evaluation import CompileResult, Measurement
from core.models import Campaign, Candidate
from core.statuses import CANDIDATE_FINAL


@dataclass
class Plan:
    """Steps to carry out after the commit."""

    compile: list[str] = field(default_factory=list)
    evaluate: list[tuple[str, str]] = field(default_factory=list)  # (candidate id, queue)
    #: the compute-sanitizer gate on a done campaign's best kernel: (candidate id, queue)
    sanitize: list[tuple[str, str]] = field(default_factory=list)
    #: campaigns to decide for next: the member of a shape set whose turn has come
    decide: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.compile or self.evaluate or self.sanitize or self.decide)


class Fleet(Protocol):
    """What a delivery tells the driver about the machines that carry out its plans."""

    #: the process's settings (a policy's context carries them: the LLM endpoint, ...)
    settings: Any

    def slots(self, session: Session, campaign: Campaign) -> int:
        """How many of the campaign's candidates the machines can work on at once (>= 1)."""
        ...

    def policy(self, campaign: Campaign) -> Policy:
        """The policy that proposes the campaign's candidates."""
        ...

    def space(self, campaign: Campaign) -> SearchSpace:
        """The campaign's search space (``ValueError`` when the fleet cannot run its shape)."""
        ...

    def prepare(self, session: Session, campaign: Campaign) -> str | None:
        """Fill a queued campaign's device (and vendor time) before it starts; the reason it
        cannot run, if it cannot."""
        ...


def decide(session: Session, campaign_id: str, fleet: Fleet) -> Plan:
    """Start a queued campaign, top its in-flight candidates up to its share, and plan their
    next steps (the campaign row is locked for the whole transaction: once, when recording a
    result took the lock already)."""
    try:
        campaign = locking.lock_campaign(session, campaign_id)
    except locking.CampaignError:
        return Plan()
    if campaign.status == "queued":
        if not shapesets.its_turn(session, campaign):
            return Plan()  # a shape set's member waits for the ones before it
        reason = fleet.prepare(session, campaign)
        if reason is not None:
            lifecycle.finish_campaign(session, campaign, "failed", reason)
            return plan(session, campaign)
        shapesets.before_start(session, campaign)
        lifecycle.start_campaign(session, campaign_id, _seeds(session, campaign))
    if campaign.status == "running":
        share = max(1, min(campaign.parallel, fleet.slots(session, campaign)))
        proposing.propose_candidates(session, campaign_id, policy=fleet.policy(campaign),
                                     space=fleet.space(campaign), top_up_to=share,
                                     settings=fleet.settings,
                                     other_shapes=shapesets.other_shapes(session, campaign))
    return plan(session, campaign)


def _seeds(session: Session, campaign: Campaign) -> list[tuple[Any, str]]:
    """The points a campaign starts from after its baseline: a shape set's member, the bests
    the set found at its nearest shapes; ``start_from: library``, the library's fallback
    points at its shape (a probe)."""
    if campaign.set_id is not None:
        return shapesets.transfer_seeds(session, campaign)
    if campaign.start_from == "library":
        return library.fallback_points(session, team_id=campaign.team_id,
                                       kernel=campaign.kernel, shape=dict(campaign.dims),
                                       gpu=campaign.gpu_name, arch=campaign.arch)
    return []


#: Candidates waiting for their next step (built once: building costs more than running it).
_WAITING = select(Candidate.id, Candidate.status).where(
    Candidate.campaign_id == bindparam("campaign_id"),
    Candidate.status.in_(("pending", "compiled"))).order_by(Candidate.iteration)


def plan(session: Session, campaign: Campaign) -> Plan:
    """The next step of every candidate waiting for one (in-flight candidates finish even when
    the campaign was cancelled: the engine records them as they come)."""
    rows = proposing.waiting(session, campaign.id)  # read by this transaction's decision
    if rows is None:
        session.flush()
        rows = [(cid, status) for cid, status in
                session.execute(_WAITING, {"campaign_id": campaign.id})]
    queue = gpu_queue(campaign.arch)
    gate = sanitize_gate.wanted(session, campaign)
    following = shapesets.advance(session, campaign) if not rows else None
    return Plan(compile=[cid for cid, status in rows if status == "pending"],
                evaluate=[(cid, queue) for cid, status in rows if status == "compiled"],
                sanitize=[(gate, queue)] if gate else [],
                decide=[following] if following else [])


def on_compiled(session: Session, candidate_id: str, result: CompileResult,
                fleet: Fleet) -> Plan:
    """Record a compile (a failure, or a success no worker recorded itself); a compiled
    candidate goes to the GPUs, a failed one frees its slot."""
    found = history.candidate_for_record(session, candidate_id)
    # loaded here, kept by this frame, so that the engine's record finds both in the session
    campaign = session.get(Campaign, found.campaign_id, options=[recording.COMPILE_RECORD_LOAD]) \
        if found is not None else None
    cand = recording.record_compile(session, candidate_id, result)
    assert campaign is not None
    if cand.status == "compiled":
        return Plan(evaluate=[(cand.id, gpu_queue(campaign.arch))])
    if cand.status in CANDIDATE_FINAL:  # a failed compile ends the candidate: free its slot
        return decide(session, campaign.id, fleet)
    return Plan()


def on_measured(session: Session, candidate_id: str, m: Measurement, fleet: Fleet) -> Plan:
    """Record a measurement (or a failure such as the redelivery cap), then decide."""
    cand = recording.record_measurement(session, candidate_id, m)
    campaign = session.get(Campaign, cand.campaign_id)
    if campaign is not None and campaign.vendor_us is None and m.perf:
        vendor = m.perf.get("vendor_us")
        campaign.vendor_us = float(vendor) if vendor is not None else None
    return decide(session, cand.campaign_id, fleet)


def on_sanitized(session: Session, candidate_id: str, record: dict[str, Any]) -> Plan:
    """Store the compute-sanitizer gate's record of a candidate."""
    sanitize_gate.record_result(session, candidate_id, record)
    return Plan()


def fail(session: Session, campaign_id: str, reason: str) -> None:
    """End a campaign that its delivery could not drive (the reason says why)."""
    campaign = session.get(Campaign, campaign_id, with_for_update=True)
    if campaign is not None:
        lifecycle.finish_campaign(session, campaign, "failed", reason[:500])
