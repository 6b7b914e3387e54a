"""The compute-sanitizer gate's records on candidates, and when a campaign asks for the gate.

The gate itself runs on a GPU (``worker/sanitize.py``); ``tuneforge sanitize`` and
``tuneforge tune --sanitize`` run it in-process, the service's GPU workers as the
``worker.sanitize`` task once a campaign with ``sanitize: true`` is done. Every record is written
here, with an event, so that the candidate's API record and ``export --format json`` show it.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from agent.engine.locking import CampaignError, emit, lock_campaign
from core.models import Campaign, Candidate


def record_result(session: Session, candidate_id: str, record: dict[str, Any]) -> Candidate:
    """Store ``record`` (the latest check of the candidate replaces an earlier one)."""
    cand = session.get(Candidate, candidate_id)
    if cand is None:
        raise CampaignError(f"no candidate {candidate_id}")
    lock_campaign(session, cand.campaign_id)  # its events are numbered under the lock
    cand.sanitizer = {**record, "candidate_id": cand.id, "source_hash": cand.source_hash}
    cand.claimed_by = None  # the gate's worker is done with it
    emit(session, cand.campaign_id, "sanitized", {
        "candidate_id": cand.id, "iteration": cand.iteration, "status": record.get("status"),
        "summary": record.get("summary"),
    })
    return cand


def wanted(session: Session, campaign: Campaign) -> str | None:
    """The candidate the gate should check now: the best kernel of a done campaign that asked
    for the gate and has no record yet (None otherwise)."""
    if not campaign.sanitize or campaign.status != "done" or campaign.backend != "gpu" \
            or not campaign.best_id:
        return None
    best = session.get(Candidate, campaign.best_id)
    if best is None or best.status != "ok" or best.sanitizer is not None:
        return None
    return best.id
