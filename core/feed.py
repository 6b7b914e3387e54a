"""A campaign's events handed on as their transaction commits (the live event stream).

The engine writes an event (``agent.engine.locking.emit``) with the next number of its campaign
(``Event.seq``: 1, 2, 3, … under the campaign's row lock) and notes it here. Once the
transaction commits, the events it wrote go to the process's publisher, one message per
campaign; a rolled-back transaction publishes nothing. The service's processes publish to
Redis (:func:`core.queues.publish_events`); embedded mode sets no publisher.

Publishing happens after the commit, so a subscriber never sees an event that is not in the
database; it can still miss one (the publisher's process died between its commit and its
publish, Redis was away) or see two transactions' messages in the other order. The numbers tell
it: a reader that sent event ``n`` of a campaign and receives ``n + 2`` reads the database for
``n + 1`` (``api/events.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from sqlalchemy import event, inspect
from sqlalchemy.orm import Session, SessionTransaction, UOWTransaction

from core.models import Event

log = logging.getLogger(__name__)

#: ``publisher(campaign_id, events)``: events as :func:`event_message` writes them, in order
Publisher = Callable[[str, list[dict[str, Any]]], None]

_publisher: Publisher | None = None
_KEY = "tuneforge.feed"


def channel(campaign_id: str) -> str:
    """The Redis pub/sub channel of a campaign's events."""
    return f"tuneforge:events:{campaign_id}"


def set_publisher(publisher: Publisher | None) -> None:
    """Publish the events of every transaction of this process that commits (None: stop)."""
    global _publisher
    _publisher = publisher


def event_message(ev: Event) -> dict[str, Any]:
    """What a subscriber receives of one event (the columns the stream shows)."""
    return {"id": ev.id, "seq": ev.seq, "kind": ev.kind, "payload": ev.payload,
            "created_at": ev.created_at.isoformat()}


def written(session: Session, ev: Event) -> None:
    """Note an event added to ``session``: published once its transaction commits."""
    if _publisher is not None:
        session.info.setdefault(_KEY, {})[id(ev)] = [ev, None]


@event.listens_for(Session, "after_flush_postexec")
def _serialize(session: Session, _flush: UOWTransaction) -> None:
    # read while the rows are fresh: after the commit a session may have expired them
    for entry in session.info.get(_KEY, {}).values():
        if entry[1] is None and entry[0].id is not None:
            entry[1] = event_message(entry[0])


@event.listens_for(Session, "after_commit")
def _publish(session: Session) -> None:
    if session.in_nested_transaction():
        return  # a savepoint released: the transaction may still roll back
    notes = session.info.pop(_KEY, None)
    if not notes or _publisher is None:
        return
    by_campaign: dict[str, list[dict[str, Any]]] = {}
    for ev, message in notes.values():
        # an event of a savepoint that rolled back is no longer persistent: never written
        if message is not None and inspect(ev).persistent:
            by_campaign.setdefault(ev.campaign_id, []).append(message)
    for campaign_id, messages in by_campaign.items():
        messages.sort(key=lambda m: int(m["seq"]))
        try:
            _publisher(campaign_id, messages)
        except Exception:  # committed all the same: readers find it in the database
            log.warning("could not publish %d events of campaign %s", len(messages),
                        campaign_id, exc_info=True)


@event.listens_for(Session, "after_transaction_end")
def _forget(session: Session, transaction: SessionTransaction) -> None:
    if transaction.parent is None:  # rolled back (a commit published them already)
        session.info.pop(_KEY, None)
