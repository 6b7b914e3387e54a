"""The schema's migrations: the head the start-up shortcut trusts is Alembic's, a database at
the head is left alone without Alembic, an older one is upgraded."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.script import ScriptDirectory

from core import db


def test_head_revision_is_alembics_head() -> None:
    script = ScriptDirectory.from_config(db.alembic_config("sqlite://"))
    assert script.get_heads() == [db.HEAD_REVISION], (
        "a new migration: set core.db.HEAD_REVISION to its revision")


def test_a_database_at_the_head_is_not_handed_to_alembic(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'new' / 't.db'}"
    assert db.database_revision(url) is None  # no file yet: Alembic creates it
    db.upgrade_database(url)
    assert db.database_revision(url) == db.HEAD_REVISION

    from alembic import command

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("Alembic ran on a database at the head")
    monkeypatch.setattr(command, "upgrade", refuse)
    db.upgrade_database(url)  # at the head: returns before Alembic
    with pytest.raises(AssertionError, match="Alembic ran"):
        db.upgrade_database(url, "20261204_campaign_settle_after")  # another revision asked


def test_an_older_database_is_upgraded(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    db.upgrade_database(url)
    db.downgrade_database(url, "-1")
    older = db.database_revision(url)
    assert older is not None
    assert older != db.HEAD_REVISION
    db.upgrade_database(url)
    assert db.database_revision(url) == db.HEAD_REVISION


def test_a_file_that_is_no_database_is_left_to_alembic(tmp_path: Path) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(b"not a database at all" * 100)
    assert db.database_revision(f"sqlite:///{path}") is None

