"""Two registrations of one name at once on PostgreSQL: the second waits on the first's unique
index, or meets it once the first commits, then takes the next version number (a changed spec)
or the stored version (the same content), instead of failing, repeating a number or storing
one content twice."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

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


def race(url: str, first: dict[str, Any], second: dict[str, Any], *,
         commit_after: threading.Event | None = None,
         committed: threading.Event | None = None) -> families.Registered:
    """Register ``first`` without committing, start ``second`` in another session (its insert
    waits on the first's row), commit the first; what the second registration answered.
    ``commit_after``: commit once it is set rather than a second after the start, then set
    ``committed``."""
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
        if commit_after is None:
            time.sleep(1.0)  # the other insert is waiting on the index now
        else:
            assert commit_after.wait(30)
        assert answers == [], answers
        holder.commit()
        if committed is not None:
            committed.set()
        thread.join(60)
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


def test_the_same_content_committed_during_the_compile_check_is_the_stored_version(
        pg: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The second registration finds nothing stored, and the first commits while the second's
    kernels compile: its insert meets the stored key (embedded families, no team, included)."""
    real_check = families.compile_check
    checking, committed = threading.Event(), threading.Event()

    def check_then_wait(normalized: dict[str, Any]) -> None:
        second = threading.current_thread() is not threading.main_thread()
        if second:  # it has looked for the key and found nothing
            checking.set()
        real_check(normalized)
        if second:
            assert committed.wait(30)

    monkeypatch.setattr(families, "compile_check", check_then_wait)
    spec = load_spec_dir(SPEC_DIR)
    done = race(pg, spec, spec, commit_after=checking, committed=committed)
    assert (done.version, done.created) == (1, False)
    with session_scope(pg) as s:
        assert [r.version for r in s.scalars(select(Family))] == [1]

def test_one_content_key_is_stored_once_without_a_team(pg: str) -> None:
    with session_scope(pg) as s:
        s.add(Family(team_id=None, name="vscale", version=1, spec_hash="0" * 64,
                     key="vscale@000000000000", spec={}))
    with pytest.raises(IntegrityError, match="uq_family_key"), session_scope(pg) as s:
        s.add(Family(team_id=None, name="vscale", version=2, spec_hash="0" * 64,
                     key="vscale@000000000000", spec={}))
