"""The event numbers' migration: existing events are numbered 1, 2, 3, … per campaign in id
order, each campaign's count is set, and the way down drops both; on PostgreSQL and SQLite."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import create_engine, inspect

from core.db import downgrade_database, upgrade_database

BEFORE = "20261130_claims"
CAMPAIGN = ("INSERT INTO campaigns (id, kernel, m, n, k, arch, backend, tolerance, policy, "
            "accept_threshold_pct, profile, parallel, seed, budget_iterations, "
            "injected_actions, status, created_at, evaluations, gpu_seconds, "
            "last_accept_iteration, next_iteration) VALUES ('{}', 'gemm_bias_relu', 8, 8, 8, "
            "'sm_90', 'gpu', 0.0001, 'expert', 0.5, 'light', 1, 0, 3, '[]', 'done', "
            "'2026-11-29 00:00:00', 0, 0, 0, 0)")
EVENT = ("INSERT INTO events (id, campaign_id, kind, payload, created_at) VALUES "
         "({}, '{}', 'note', '{{}}', '2026-11-29 00:00:00')")


def round_trip(url: str) -> None:
    upgrade_database(url, BEFORE)
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            for cid in ("a", "b", "c"):
                conn.exec_driver_sql(CAMPAIGN.format(cid))
            for event_id, cid in ((3, "a"), (4, "b"), (7, "a"), (9, "a"), (12, "b")):
                conn.exec_driver_sql(EVENT.format(event_id, cid))
        upgrade_database(url)
        with engine.connect() as conn:
            numbered = conn.exec_driver_sql(
                "SELECT id, seq FROM events ORDER BY id").all()
            counts: dict[str, int] = dict(conn.exec_driver_sql(
                "SELECT id, event_seq FROM campaigns").all())
        assert [tuple(r) for r in numbered] == [(3, 1), (4, 1), (7, 2), (9, 3), (12, 2)]
        assert counts == {"a": 3, "b": 2, "c": 0}
        uniques = {tuple(u["column_names"]) for u in inspect(engine).get_unique_constraints(
            "events")}
        assert ("campaign_id", "seq") in uniques
        downgrade_database(url, BEFORE)
        assert "seq" not in {c["name"] for c in inspect(engine).get_columns("events")}
        assert "event_seq" not in {c["name"] for c in inspect(engine).get_columns("campaigns")}
        upgrade_database(url)  # and up again: nothing was left behind to collide with
    finally:
        engine.dispose()


def test_event_numbers_migrate_on_sqlite(tmp_path: Path) -> None:
    round_trip(f"sqlite:///{tmp_path / 'm.db'}")


def test_event_numbers_migrate_on_postgres(empty_db: str) -> None:
    round_trip(empty_db)
