"""The candidates of a campaign as a policy sees them, read in full (:func:`history`) or
incrementally (:class:`HistoryCache`), and the candidate a result is recorded for.

A process keeps the decoded history of the campaigns it decides for (:data:`HISTORY`): a
decision reads only the candidates that may have changed since its last read, not the whole
campaign, and decides exactly as it would from a full read.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, func, or_, select
from sqlalchemy.orm import Session, defer
from sqlalchemy.orm.util import identity_key

from agent.engine.locking import scratch
from agent.policies.base import HistoryItem
from core.models import Campaign, Candidate
from core.statuses import CANDIDATE_FINAL, CANDIDATE_IN_FLIGHT
from kernels import get_family

#: What a policy never reads of a candidate (kilobytes of text and JSON per row).
_NOT_FOR_POLICIES = (Candidate.source, Candidate.compile_log, Candidate.feedback, Candidate.perf,
                     Candidate.reason)


#: What recording a result reads of the candidate (the feedback record's inputs; the large
#: columns it only writes stay unloaded).
_RECORD_LOAD = [defer(c) for c in (*_NOT_FOR_POLICIES, Candidate.correctness, Candidate.profile,
                                   Candidate.decision)]


def _history_item(family: Any, c: Candidate) -> HistoryItem:
    return HistoryItem(
        id=c.id, iteration=c.iteration, params=family.params_from_dict(c.params),
        key=c.params_key, status=c.status, action=c.action, parent_id=c.parent_id,
        avg_us=c.avg_us, accepted=c.accepted, compile=c.compile, profile=c.profile,
        correctness=c.correctness,
        improvement_pct=(c.decision or {}).get("improvement_pct"),
    )


# Statements built once (building one costs more CPU than running it); values are bound.
# A policy never reads the large columns: loading them at every decision made a campaign
# quadratic in its length.
_HISTORY = (select(Candidate).where(Candidate.campaign_id == bindparam("campaign_id"))
            .options(*(defer(c) for c in _NOT_FOR_POLICIES)).order_by(Candidate.iteration))


#: the candidates proposed after ``after`` and those of ``open_ids`` (in flight when last read)
_HISTORY_SINCE = _HISTORY.where(or_(Candidate.iteration > bindparam("after"),
                                    Candidate.id.in_(bindparam("open_ids", expanding=True))))


#: The candidate and its campaign, both locked, in one round trip. Locking the candidate's row
#: too keeps what is read of it current: a statement that waited for the campaign's lock
#: returns the rows as the transaction it waited for left them (a second delivery of the same
#: result then finds the candidate finished), where a read before the lock would be stale.
_FOR_RECORD = (select(Candidate, Campaign).join(Campaign, Campaign.id == Candidate.campaign_id)
               .where(Candidate.id == bindparam("id")).options(*_RECORD_LOAD)
               .with_for_update().execution_options(populate_existing=True))


def candidate_for_record(session: Session, candidate_id: str) -> Candidate | None:
    """The candidate whose result is being recorded, without the large columns that recording
    only writes, with its campaign's row locked for the rest of the transaction (from the
    session when this transaction loaded and locked them already)."""
    locked: set[str] = scratch(session).setdefault("locked", set())
    found = session.identity_map.get(identity_key(Candidate, candidate_id))
    if isinstance(found, Candidate) and found.campaign_id in locked:
        return found
    row = session.execute(_FOR_RECORD, {"id": candidate_id}).first()
    if row is None:
        return None
    cand, campaign = row
    locked.add(campaign.id)
    # held for the transaction: the session's identity map keeps only weak references
    scratch(session).setdefault("held", []).append(campaign)
    return cand


_IN_FLIGHT = select(func.count()).select_from(Candidate).where(
    Candidate.campaign_id == bindparam("campaign_id"),
    Candidate.status.in_(CANDIDATE_IN_FLIGHT))


def history(session: Session, campaign: Campaign) -> list[HistoryItem]:
    """Every candidate of the campaign as a policy sees it, read in full from the database."""
    family = get_family(campaign.kernel)
    return [_history_item(family, c)
            for c in session.scalars(_HISTORY, {"campaign_id": campaign.id})]


def in_flight(session: Session, campaign_id: str) -> int:
    """Candidates proposed but not finished."""
    return int(session.scalar(_IN_FLIGHT, {"campaign_id": campaign_id}) or 0)


@dataclass(frozen=True)
class _Known:
    """What a process knows of one campaign's candidates as of a committed read."""

    final: dict[str, HistoryItem]  # id -> item of every finished candidate read so far
    max_iteration: int  # every iteration up to here is in ``final`` or in ``open_ids``
    open_ids: tuple[str, ...]  # candidates in flight when read (they may have changed since)


class HistoryCache:
    """The decoded history of the campaigns this process decides for, read incrementally.

    What a policy reads of a finished candidate never changes again (only the engine's record
    of a result writes a final status and its figures, and only to a candidate in flight; the
    sanitizer gate's later record is not policy input), so each read fetches only the
    candidates proposed since the last read and those that were in flight then: a handful of
    rows, however long the campaign. The caller holds the campaign's row lock, so every
    candidate proposed before the read is committed and visible to it.

    What a transaction read enters the cache only when that transaction commits: a decision
    rolled back (with the results it recorded) leaves nothing behind. The list returned equals
    :func:`history`'s full read; ``tests/service/test_history_cache.py`` holds it to that.
    """

    def __init__(self, max_campaigns: int = 64) -> None:
        self.max_campaigns = max_campaigns
        self._known: OrderedDict[tuple[str, str], _Known] = OrderedDict()
        self._mutex = threading.Lock()
        self.rows_read = 0  # candidate rows decoded so far (a figure for tests and benches)

    def clear(self) -> None:
        """Forget every campaign."""
        with self._mutex:
            self._known.clear()

    def read(self, session: Session, campaign: Campaign) -> list[HistoryItem]:
        """Every candidate of ``campaign`` as a policy sees it, in iteration order (call with
        the campaign's row locked)."""
        key = (str(session.get_bind().engine.url), campaign.id)
        with self._mutex:
            known = self._known.get(key)
            if known is not None:
                self._known.move_to_end(key)
        found = (session.scalars(_HISTORY, {"campaign_id": campaign.id}) if known is None else
                 session.scalars(_HISTORY_SINCE, {
                     "campaign_id": campaign.id, "after": known.max_iteration,
                     "open_ids": list(known.open_ids)}))
        family = get_family(campaign.kernel)
        rows = [_history_item(family, c) for c in found]
        self.rows_read += len(rows)
        base = known.final if known is not None else {}
        fresh_final = {h.id: h for h in rows if h.status in CANDIDATE_FINAL}
        after = _Known(
            final={**base, **fresh_final} if fresh_final else base,
            max_iteration=max([h.iteration for h in rows],
                              default=known.max_iteration if known is not None else -1),
            open_ids=tuple(h.id for h in rows if h.status not in CANDIDATE_FINAL),
        )
        scratch(session).setdefault("on_commit", {})[("history", key)] = (
            lambda: self._store(key, known, after))
        items = [*base.values(), *rows]
        items.sort(key=lambda h: h.iteration)
        return items

    def final_item(self, session: Session, campaign_id: str,
                   candidate_id: str) -> HistoryItem | None:
        """A finished candidate as a committed read found it (it cannot have changed since),
        or None when this process has not read it."""
        known = self._known.get((str(session.get_bind().engine.url), campaign_id))
        return known.final.get(candidate_id) if known is not None else None

    def _store(self, key: tuple[str, str], before: _Known | None, after: _Known) -> None:
        with self._mutex:
            if self._known.get(key) is not before:
                return  # another transaction of this process stored a newer read first
            self._known[key] = after
            self._known.move_to_end(key)
            while len(self._known) > self.max_campaigns:
                self._known.popitem(last=False)


#: The history cache of this process (decisions of the agent workers and of embedded mode).
HISTORY = HistoryCache()
