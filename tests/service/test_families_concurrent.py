"""Two registrations of one name at once on PostgreSQL: the second waits on the first's unique
index, or meets it once the first commits, then takes the next version number (a changed spec)
or the stored version (the same content), instead of failing, repeating a number or storing
one content twice."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from core import families
from core.db import session_scope
from core.models import Family
from kernels.userspec import load_spec_dir
from service.races import while_held

SPEC_DIR = Path(__file__).resolve().parents[1] / "data" / "families" / "vscale"


def race(url: str, first: dict[str, Any], second: dict[str, Any],
         **order: threading.Event) -> families.Registered:
    """Register ``first`` without committing, ``second`` in another session (its insert waits
    on the first's row, or ``order`` says when the first commits: ``races.while_held``); what
    the second registration answered."""
    answer = while_held(url, lambda s: families.register(s, spec=first, team_id=None),
                        lambda s: families.register(s, spec=second, team_id=None), **order)
    assert isinstance(answer, families.Registered), answer
    return answer


def test_a_changed_spec_takes_the_next_number(fresh_db: str) -> None:
    spec = load_spec_dir(SPEC_DIR)
    done = race(fresh_db, spec, {**spec, "description": "registered at the same moment"})
    assert (done.version, done.created) == (2, True)
    with session_scope(fresh_db) as s:
        assert [r.version for r in s.scalars(select(Family).order_by(Family.version))] == [1, 2]


def test_the_same_content_is_the_stored_version(fresh_db: str) -> None:
    spec = load_spec_dir(SPEC_DIR)
    done = race(fresh_db, spec, spec)
    assert (done.version, done.created) == (1, False)
    with session_scope(fresh_db) as s:
        assert len(s.scalars(select(Family)).all()) == 1


def test_the_same_content_committed_during_the_compile_check_is_the_stored_version(
        fresh_db: str, monkeypatch: pytest.MonkeyPatch) -> None:
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
    done = race(fresh_db, spec, spec, commit_after=checking, committed=committed)
    assert (done.version, done.created) == (1, False)
    with session_scope(fresh_db) as s:
        assert [r.version for r in s.scalars(select(Family))] == [1]

def test_one_content_key_is_stored_once_without_a_team(fresh_db: str) -> None:
    with session_scope(fresh_db) as s:
        s.add(Family(team_id=None, name="vscale", version=1, spec_hash="0" * 64,
                     key="vscale@000000000000", spec={}))
    with pytest.raises(IntegrityError, match="uq_family_key"), session_scope(fresh_db) as s:
        s.add(Family(team_id=None, name="vscale", version=2, spec_hash="0" * 64,
                     key="vscale@000000000000", spec={}))
