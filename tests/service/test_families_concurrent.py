"""Two registrations of one name at once on PostgreSQL: the second waits on the first's unique
index, then takes the next version number (a changed spec) or the stored version (the same
content), instead of failing or repeating a number."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from core import families
from core.db import session_factory, session_scope, upgrade_database
from core.models import Family
from kernels.userspec import load_spec_dir
from service.service_stack import create_database, drop_database

SPEC_DIR = Path(__file__).resolve().parents[1] / "data" / "families" / "vscale"


@pytest.fixture
def pg() -> Iterator[str]:
    url = create_database("tuneforge_families_race")
    try:
        upgrade_database(url)
        yield url
    finally:
        drop_database(url)


def race(url: str, first: dict[str, Any], second: dict[str, Any]) -> families.Registered:
    """Register ``first`` without committing, start ``second`` in another session (its insert
    waits on the first's row), commit the first; what the second registration answered."""
    answers: list[Any] = []
    holder = session_factory(url)()
    try:
        families.register(holder, spec=first, team_id=None)

        def other() -> None:
            try:
                with session_scope(url) as s:
                    answers.append(families.register(s, spec=second, team_id=None))
            except Exception as exc:  # the test says what it was
                answers.append(exc)

        thread = threading.Thread(target=other)
        thread.start()
        time.sleep(1.0)  # the other insert is waiting on the index now
        assert answers == [], answers
        holder.commit()
        thread.join(30)
    finally:
        holder.close()
    assert len(answers) == 1
    assert isinstance(answers[0], families.Registered), answers
    return answers[0]


def test_a_changed_spec_takes_the_next_number(pg: str) -> None:
    spec = load_spec_dir(SPEC_DIR)
    done = race(pg, spec, {**spec, "description": "registered at the same moment"})
    assert (done.version, done.created) == (2, True)
    with session_scope(pg) as s:
        assert [r.version for r in s.scalars(select(Family).order_by(Family.version))] == [1, 2]


def test_the_same_content_is_the_stored_version(pg: str) -> None:
    spec = load_spec_dir(SPEC_DIR)
    done = race(pg, spec, spec)
    assert (done.version, done.created) == (1, False)
    with session_scope(pg) as s:
        assert len(s.scalars(select(Family)).all()) == 1
