"""The families migration on PostgreSQL and SQLite: the table comes with its unique rules (one
version number per team and name, embedded families without a team counted as one team; one
row per team and content key), existing campaigns are kept, and the way down refuses while a
campaign runs one of the families."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect
from sqlalchemy.exc import IntegrityError

from core.db import downgrade_database, upgrade_database

BEFORE = "20261201_dims"
CAMPAIGN = ("INSERT INTO campaigns (id, kernel, dims, arch, backend, tolerance, policy, "
            "accept_threshold_pct, profile, parallel, seed, budget_iterations, "
            "injected_actions, status, created_at, evaluations, gpu_seconds, "
            "last_accept_iteration, next_iteration, event_seq, sanitize) VALUES ('{id}', "
            "'{kernel}', '{{\"n\": 8}}', 'sm_90', 'gpu', 0.0001, 'expert', 0.5, 'light', 1, 0, "
            "3, '[]', 'done', '2026-12-01 00:00:00', 0, 0, 0, 0, 0, false)")
FAMILY = ("INSERT INTO families (id, team_id, name, version, spec_hash, key, spec, created_at) "
          "VALUES ('{id}', {team}, 'vscale', {version}, 'h', '{key}', '{{}}', "
          "'2026-12-01 00:00:00')")


def round_trip(url: str) -> None:
    upgrade_database(url, BEFORE)
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(CAMPAIGN.format(id="a", kernel="gemm_bias_relu"))
        upgrade_database(url)
        assert "families" in inspect(engine).get_table_names()
        with engine.begin() as conn:
            conn.exec_driver_sql("INSERT INTO teams (id, name, created_at) VALUES "
                                 "('t1', 'one', '2026-12-01 00:00:00')")
            conn.exec_driver_sql(FAMILY.format(id="f1", team="NULL", version=1, key="vscale@1"))
            conn.exec_driver_sql(FAMILY.format(id="f2", team="NULL", version=2, key="vscale@2"))
            conn.exec_driver_sql(FAMILY.format(id="f3", team="'t1'", version=1, key="vscale@1"))
        for team, version, key in (("NULL", 2, "vscale@3"),  # embedded: v2 is taken
                                   ("'t1'", 1, "vscale@4"),  # the team's v1 is taken
                                   ("'t1'", 2, "vscale@1")):  # the team has this content
            with pytest.raises(IntegrityError), engine.begin() as conn:
                conn.exec_driver_sql(FAMILY.format(id="fx", team=team, version=version,
                                                   key=key))
        with engine.begin() as conn:
            conn.exec_driver_sql(CAMPAIGN.format(id="b", kernel="vscale@2"))
        with pytest.raises(RuntimeError, match="1 campaign"):
            downgrade_database(url, BEFORE)
        with engine.begin() as conn:
            conn.exec_driver_sql("DELETE FROM campaigns WHERE id = 'b'")
        downgrade_database(url, BEFORE)
        assert "families" not in inspect(engine).get_table_names()
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT id FROM campaigns").all() == [("a",)]
        upgrade_database(url)
        assert "families" in inspect(engine).get_table_names()
    finally:
        engine.dispose()


def test_families_on_sqlite(tmp_path: Path) -> None:
    round_trip(f"sqlite:///{tmp_path / 'm.db'}")


def test_families_on_postgres(empty_db: str) -> None:
    round_trip(empty_db)
