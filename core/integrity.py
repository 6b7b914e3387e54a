"""Consistency checks of a tuneforge database (``tuneforge db check``): rows that no code path
should leave behind, found by plain queries. Each finding names the table, the row and the rule.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import ValidationError
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from core.feedback import FeedbackRecord
from core.models import Campaign, Candidate
from core.statuses import CANDIDATE_FINAL, CANDIDATE_IN_FLIGHT

#: Campaign statuses after which nothing may still be in flight.
FINISHED = ("done", "failed", "cancelled")


@dataclass(frozen=True)
class Finding:
    """One inconsistent row."""

    rule: str
    table: str
    row_id: str
    detail: str

    def __str__(self) -> str:
        return f"{self.rule}: {self.table} {self.row_id}: {self.detail}"


def check(session: Session, *, feedback_batch: int = 500) -> list[Finding]:
    """Every finding of every rule (an empty list: the database is consistent)."""
    found: list[Finding] = []
    campaign_ids = set(session.scalars(select(Campaign.id)))

    # candidates whose campaign is gone (the FK cascades, but SQLite runs without FK checks)
    for cid, parent in session.execute(select(Candidate.id, Candidate.campaign_id)
                                     .where(Candidate.campaign_id.not_in(campaign_ids or {""}))):
        found.append(Finding("orphan_candidate", "candidates", cid, f"no campaign {parent}"))

    # in-flight candidates of finished campaigns
    rows = session.execute(
        select(Candidate.id, Candidate.status, Campaign.id, Campaign.status)
        .join(Campaign, Campaign.id == Candidate.campaign_id)
        .where(Campaign.status.in_(FINISHED), Candidate.status.in_(CANDIDATE_IN_FLIGHT)))
    for cand_id, cand_status, camp_id, camp_status in rows:
        found.append(Finding("in_flight_after_finish", "candidates", cand_id,
                             f"{cand_status} in campaign {camp_id} which is {camp_status}"))

    # best / incumbent / baseline ids that do not exist, or belong to another campaign
    referenced = (select(Campaign.best_id).union(select(Campaign.incumbent_id),
                                                  select(Campaign.baseline_id)))
    owner: dict[str, str] = {
        cand_id: camp_id for cand_id, camp_id in session.execute(
            select(Candidate.id, Candidate.campaign_id).where(Candidate.id.in_(referenced)))}
    for camp in session.execute(select(Campaign.id, Campaign.best_id, Campaign.incumbent_id,
                                       Campaign.baseline_id)):
        for name, ref in (("best_id", camp[1]), ("incumbent_id", camp[2]),
                          ("baseline_id", camp[3])):
            if ref is not None and owner.get(ref) != camp[0]:
                found.append(Finding("dangling_reference", "campaigns", camp[0],
                                     f"{name} {ref} is not a candidate of this campaign"))

    # the evaluations counter against the finished candidates
    finished: dict[str, int] = {camp_id: n for camp_id, n in session.execute(
        select(Candidate.campaign_id, func.count()).where(Candidate.status.in_(CANDIDATE_FINAL))
        .group_by(Candidate.campaign_id))}
    for camp_id, evaluations in session.execute(select(Campaign.id, Campaign.evaluations)):
        if evaluations != finished.get(camp_id, 0):
            found.append(Finding("evaluations_mismatch", "campaigns", camp_id,
                                 f"evaluations = {evaluations} but "
                                 f"{finished.get(camp_id, 0)} candidates finished"))

    # candidate rows written twice: same (campaign, iteration) or same point (unique keys)
    for key in (Candidate.iteration, Candidate.params_key):
        dupes = session.execute(select(Candidate.campaign_id, key, func.count())
                                .group_by(Candidate.campaign_id, key).having(func.count() > 1))
        for camp_id, value, n in dupes:
            found.append(Finding("duplicate_candidate", "campaigns", camp_id,
                                 f"{n} candidates with {key.key} = {value}"))

    # feedback records that do not validate against the feedback record's schema
    offset = 0
    while True:
        batch = session.execute(select(Candidate.id, Candidate.status, Candidate.feedback)
                                .order_by(Candidate.id).offset(offset).limit(feedback_batch)
                                ).all()
        if not batch:
            break
        offset += len(batch)
        for cand_id, status, feedback in batch:
            if feedback is None:
                if status in CANDIDATE_FINAL:
                    found.append(Finding("missing_feedback", "candidates", cand_id,
                                         f"{status} without a feedback record"))
                continue
            try:
                FeedbackRecord.model_validate(feedback)
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first["loc"])
                found.append(Finding("invalid_feedback", "candidates", cand_id,
                                     f"{where}: {first['msg']}"))
    return found
