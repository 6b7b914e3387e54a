"""Two admins at once on PostgreSQL: the same team created twice is refused by name, not with a
traceback; two key rotations leave the team one key, the second's."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import select

from api import security
from core.db import session_factory, session_scope, upgrade_database
from core.models import ApiKey
from service.service_stack import create_database, drop_database


@pytest.fixture
def pg() -> Iterator[str]:
    url = create_database("tuneforge_team_race")
    try:
        upgrade_database(url)
        yield url
    finally:
        drop_database(url)


def while_held(url: str, first: Callable[[Any], Any], second: Callable[[Any], Any]) -> Any:
    """Run ``first`` in a session left open, ``second`` in another thread's session (it waits on
    the first's rows), commit the first; what ``second`` returned or raised."""
    answers: list[Any] = []
    holder = session_factory(url)()
    try:
        first(holder)

        def other() -> None:
            try:
                with session_scope(url) as s:
                    answers.append(second(s))
            except Exception as exc:  # the test says what it was
                answers.append(exc)

        thread = threading.Thread(target=other)
        thread.start()
        time.sleep(1.0)  # the other statement is waiting on the first's row now
        assert answers == [], answers
        holder.commit()
        thread.join(30)
    finally:
        holder.close()
    assert len(answers) == 1
    return answers[0]


def test_a_team_created_twice_at_once_is_refused_by_name(pg: str) -> None:
    answer = while_held(pg, lambda s: security.create_team(s, name="kernels"),
                        lambda s: security.create_team(s, name="kernels"))
    assert isinstance(answer, security.TeamKeyError), answer
    assert "team 'kernels' exists" in str(answer)


def test_two_rotations_at_once_leave_one_key(pg: str) -> None:
    with session_scope(pg) as s:
        security.create_team(s, name="kernels")
    keys: list[str] = []
    second = while_held(pg, lambda s: keys.append(security.rotate_key(s, team_name="kernels")),
                        lambda s: security.rotate_key(s, team_name="kernels"))
    assert isinstance(second, str), second
    with session_scope(pg) as s:
        live = s.scalars(select(ApiKey.key_hash).where(ApiKey.revoked_at.is_(None))).all()
    assert live == [security.hash_key(second)]
    assert security.hash_key(keys[0]) not in live
