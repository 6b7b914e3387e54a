"""The retire-and-size migration on PostgreSQL and SQLite: versions stored before get their
spec's size and are not retired; the way down drops both columns, and the table keeps its
unique rules both ways."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect
from sqlalchemy.exc import IntegrityError

from core.db import downgrade_database, upgrade_database

BEFORE = "20261204_campaign_settle_after"
FAMILY = ("INSERT INTO families (id, team_id, name, version, spec_hash, key, spec, created_at) "
          "VALUES ('f1', NULL, 'vscale', 1, 'h', 'vscale@1', '{\"name\": \"vscale\"}', "
          "'2026-12-01 00:00:00')")


def round_trip(url: str) -> None:
    upgrade_database(url, BEFORE)
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(FAMILY)
        upgrade_database(url)
        with engine.begin() as conn:
            size, retired = conn.exec_driver_sql(
                "SELECT size_bytes, retired_at FROM families").one()
        assert size == len('{"name": "vscale"}')
        assert retired is None
        downgrade_database(url, BEFORE)
        columns = {c["name"] for c in inspect(engine).get_columns("families")}
        assert not columns & {"size_bytes", "retired_at"}
        upgrade_database(url)
        # one version number per team and name still (SQLite's copy of the table on the way
        # down kept its expression index)
        with pytest.raises(IntegrityError), engine.begin() as conn:
            conn.exec_driver_sql(FAMILY.replace("'f1'", "'f2'").replace("vscale@1", "vscale@2"))
        downgrade_database(url, "20261201_dims")
    finally:
        engine.dispose()


def test_on_postgres(empty_db: str) -> None:
    round_trip(empty_db)


def test_on_sqlite(tmp_path: Path) -> None:
    round_trip(f"sqlite:///{tmp_path / 'old.db'}")


