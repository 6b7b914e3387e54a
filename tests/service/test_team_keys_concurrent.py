"""Two admins at once on PostgreSQL: the same team created twice is refused by name, not with a
traceback; two key rotations leave the team one key, the second's."""

from __future__ import annotations

from sqlalchemy import select

from api import security
from core.db import session_scope
from core.models import ApiKey
from service.races import while_held


def test_a_team_created_twice_at_once_is_refused_by_name(fresh_db: str) -> None:
    answer = while_held(fresh_db, lambda s: security.create_team(s, name="kernels"),
                        lambda s: security.create_team(s, name="kernels"))
    assert isinstance(answer, security.TeamKeyError), answer
    assert "team 'kernels' exists" in str(answer)


def test_two_rotations_at_once_leave_one_key(fresh_db: str) -> None:
    with session_scope(fresh_db) as s:
        security.create_team(s, name="kernels")
    keys: list[str] = []
    second = while_held(
        fresh_db, lambda s: keys.append(security.rotate_key(s, team_name="kernels")),
        lambda s: security.rotate_key(s, team_name="kernels"))
    assert isinstance(second, str), second
    with session_scope(fresh_db) as s:
        live = s.scalars(select(ApiKey.key_hash).where(ApiKey.revoked_at.is_(None))).all()
    assert live == [security.hash_key(second)]
    assert security.hash_key(keys[0]) not in live
