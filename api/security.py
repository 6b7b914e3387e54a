"""Teams and API keys: keys are shown once and stored as SHA-256 hashes with a short prefix.

Service functions are keyword-only (``create_team``, ``rotate_key``, ``revoke_key``,
``authenticate``); the CLI's ``tuneforge admin`` and the API's dependencies call them.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

from sqlalchemy import bindparam, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from core.models import ApiKey, Team, utcnow

KEY_PREFIX = "tf_"


class TeamKeyError(ValueError):
    """A key operation that cannot be done (names the problem)."""


def hash_key(key: str) -> str:
    """The stored form of a key."""
    return hashlib.sha256(key.encode()).hexdigest()


def _new_key(session: Session, team: Team) -> str:
    prefix = KEY_PREFIX + secrets.token_hex(4)
    key = f"{prefix}_{secrets.token_urlsafe(24)}"
    session.add(ApiKey(team_id=team.id, prefix=prefix, key_hash=hash_key(key)))
    return key


def create_team(session: Session, *, name: str) -> tuple[Team, str]:
    """A new team and its first key (the only time the key is shown)."""
    name = name.strip()
    if not name or len(name) > 100:
        raise TeamKeyError("a team name has 1 to 100 characters")
    exists = TeamKeyError(f"team {name!r} exists: use `tuneforge admin rotate-key {name}`")
    if session.scalar(select(Team).where(Team.name == name)) is not None:
        raise exists
    team = Team(name=name)
    try:
        with session.begin_nested():  # the unique name: another admin's at the same moment
            session.add(team)
    except IntegrityError:
        raise exists from None
    return team, _new_key(session, team)


def rotate_key(session: Session, *, team_name: str) -> str:
    """A new key for the team; its other keys are revoked. The team's row is locked until the
    caller commits, so that two rotations at once leave one key, the second's."""
    team = session.scalar(select(Team).where(Team.name == team_name).with_for_update())
    if team is None:
        raise TeamKeyError(f"no team {team_name!r}: create it with `tuneforge admin create-team`")
    session.execute(update(ApiKey).where(ApiKey.team_id == team.id, ApiKey.revoked_at.is_(None))
                    .values(revoked_at=utcnow()))
    return _new_key(session, team)


def revoke_key(session: Session, *, prefix: str) -> ApiKey:
    """Revoke the key whose prefix is ``prefix`` (``tf_`` may be left out)."""
    if not prefix.startswith(KEY_PREFIX):
        prefix = KEY_PREFIX + prefix
    keys = session.scalars(select(ApiKey).where(ApiKey.prefix == prefix)).all()
    if not keys:
        raise TeamKeyError(f"no key with prefix {prefix!r}")
    if len(keys) > 1:
        raise TeamKeyError(f"{len(keys)} keys share prefix {prefix!r}: revoke them with "
                        "rotate-key instead")
    key = keys[0]
    if key.revoked_at is None:
        key.revoked_at = utcnow()
    return key


@dataclass(frozen=True)
class Authenticated:
    """Who a request is."""

    team_id: str
    team_name: str
    key_prefix: str


#: Built once (every request runs it; building it cost more CPU than running it).
_KEY_OWNER = (select(ApiKey.prefix, ApiKey.revoked_at, Team.id, Team.name)
              .join(Team, Team.id == ApiKey.team_id)
              .where(ApiKey.key_hash == bindparam("key_hash")))


def authenticate(session: Session, *, key: str) -> Authenticated | str:
    """The team of ``key``, or why it is refused."""
    row = session.execute(_KEY_OWNER, {"key_hash": hash_key(key)}).first()
    if row is None:
        return "invalid API key: check TUNEFORGE_API_KEY or --key"
    prefix, revoked_at, team_id, team_name = row
    if revoked_at is not None:
        return f"API key {prefix} was revoked: ask an admin for a new one (rotate-key)"
    return Authenticated(team_id=team_id, team_name=team_name, key_prefix=prefix)


_KEY_STATE = (select(ApiKey.prefix, ApiKey.revoked_at)
              .where(ApiKey.key_hash == bindparam("key_hash")))


def key_refused(session: Session, *, key_hash: str) -> str | None:
    """Why the key stored as ``key_hash`` is refused now (revoked, or gone), or None while it
    holds (an open event stream asks this every few seconds)."""
    row = session.execute(_KEY_STATE, {"key_hash": key_hash}).first()
    if row is None:
        return "the API key is gone: ask an admin for a new one (rotate-key)"
    if row.revoked_at is not None:
        return f"API key {row.prefix} was revoked: ask an admin for a new one (rotate-key)"
    return None
