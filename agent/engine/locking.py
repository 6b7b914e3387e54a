"""A campaign's row lock, its events, and what one transaction notes down.

Every step of the engine runs in one transaction that holds its campaign's row lock
(:func:`lock_campaign`), so two results arriving together never produce a double step and the
events (:func:`emit`) are numbered in the order the transactions commit. What a transaction
learns on the way (the locks it holds, the history it read, what waits for its next step) is
kept in :func:`scratch` and forgotten when the transaction ends.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import bindparam, event, select
from sqlalchemy.orm import Session, SessionTransaction

from core import feed
from core.models import Campaign, Event


class CampaignError(ValueError):
    """A request the campaign cannot take (names the problem)."""


def emit(session: Session, campaign_id: str, kind: str, payload: dict[str, Any]) -> None:
    """Append an event (SSE stream, audit log) with the campaign's next number. The caller
    holds the campaign's row lock (or created the campaign), so the campaign is in the
    session and its numbers follow the order in which the transactions commit."""
    campaign = session.get(Campaign, campaign_id)
    if campaign is None:
        raise CampaignError(f"no campaign {campaign_id}")
    campaign.event_seq = (campaign.event_seq or 0) + 1
    ev = Event(campaign_id=campaign_id, seq=campaign.event_seq, kind=kind, payload=payload)
    session.add(ev)
    feed.written(session, ev)


_LOCK = (select(Campaign).where(Campaign.id == bindparam("id")).with_for_update()
         .execution_options(populate_existing=True))


_SCRATCH = "tuneforge.transaction"


def scratch(session: Session) -> dict[str, Any]:
    """Per-transaction notes of the engine (locks taken, history read, what waits for its next
    step), forgotten when the transaction ends (see the listeners below)."""
    notes: dict[str, Any] = session.info.setdefault(_SCRATCH, {})
    return notes


@event.listens_for(Session, "after_commit")
def _on_commit(session: Session) -> None:
    if session.in_nested_transaction():
        return  # a savepoint released: the transaction may still roll back
    for apply in scratch(session).pop("on_commit", {}).values():
        apply()


@event.listens_for(Session, "after_soft_rollback")
def _on_rollback(session: Session, _previous: SessionTransaction) -> None:
    session.info.pop(_SCRATCH, None)  # even a savepoint's rollback releases its row locks


@event.listens_for(Session, "after_transaction_end")
def _on_transaction_end(session: Session, transaction: SessionTransaction) -> None:
    if transaction.parent is None:
        session.info.pop(_SCRATCH, None)


def lock_campaign(session: Session, campaign_id: str) -> Campaign:
    """The campaign row, locked for the rest of the transaction (``SELECT … FOR UPDATE`` and
    fresh from the database the first time in a transaction; from the session after that: the
    lock keeps every other writer out)."""
    locked: set[str] = scratch(session).setdefault("locked", set())
    if campaign_id in locked:
        campaign = session.get(Campaign, campaign_id)
    else:
        campaign = session.scalars(_LOCK, {"id": campaign_id}).first()
        if campaign is not None:
            locked.add(campaign_id)
    if campaign is None:
        raise CampaignError(f"no campaign {campaign_id}")
    return campaign
