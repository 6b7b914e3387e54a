"""The family-key migration on PostgreSQL and SQLite: one content key stored twice without a
team (possible before it) keeps its first version; a repeat is refused after it; the way down
gives the plain constraint back, and the table keeps its version rule both ways."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import create_engine
from sqlalchemy.exc import IntegrityError

from core.db import HEAD_REVISION, database_revision, downgrade_database, upgrade_database

BEFORE = "20261204_family_retire_and_size"
FAMILY = ("INSERT INTO families (id, team_id, name, version, spec_hash, key, spec, created_at, "
          "size_bytes) VALUES ('{id}', NULL, 'vscale', {version}, 'h', '{key}', '{{}}', "
          "'2026-12-07 00:00:00', 2)")


def family(row_id: str, version: int, key: str) -> str:
    return FAMILY.format(id=row_id, version=version, key=key)


def round_trip(url: str) -> None:
    upgrade_database(url, BEFORE)
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            for row in (("a", 1, "vscale@1"), ("b", 2, "vscale@1"), ("c", 3, "vscale@2")):
                conn.exec_driver_sql(family(*row))
        upgrade_database(url)
        with engine.begin() as conn:
            kept = conn.exec_driver_sql("SELECT id, version FROM families ORDER BY version")
            assert [tuple(r) for r in kept] == [("a", 1), ("c", 3)]
        with pytest.raises(IntegrityError), engine.begin() as conn:
            conn.exec_driver_sql(family("d", 4, "vscale@1"))  # the content stored again
        downgrade_database(url, BEFORE)
        with pytest.raises(IntegrityError), engine.begin() as conn:
            conn.exec_driver_sql(family("e", 3, "vscale@9"))  # version 3 again: refused
        with engine.begin() as conn:  # the plain constraint: NULL teams repeat a key again
            conn.exec_driver_sql(family("f", 4, "vscale@1"))
        upgrade_database(url)  # and up again: the repeat goes
        assert database_revision(url) == HEAD_REVISION
        with engine.begin() as conn:
            kept = conn.exec_driver_sql("SELECT id FROM families ORDER BY version")
            assert [r[0] for r in kept] == ["a", "c"]
    finally:
        engine.dispose()


def test_on_postgres(empty_db: str) -> None:
    round_trip(empty_db)


def test_on_sqlite(tmp_path: Path) -> None:
    round_trip(f"sqlite:///{tmp_path / 'old.db'}")
