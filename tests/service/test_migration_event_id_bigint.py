"""The events.id migration: 64-bit ids on PostgreSQL (column and sequence), rows kept, and the
way down; SQLite is left as it is (its INTEGER PRIMARY KEY is 64-bit)."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import create_engine

from core.db import downgrade_database, upgrade_database

BEFORE = "20261130_event_seq"
AFTER = "20261201_event_id_bigint"
CAMPAIGN = ("INSERT INTO campaigns (id, kernel, m, n, k, arch, backend, tolerance, policy, "
            "accept_threshold_pct, profile, parallel, seed, budget_iterations, "
            "injected_actions, status, created_at, evaluations, gpu_seconds, "
            "last_accept_iteration, next_iteration, event_seq) VALUES ('a', 'gemm_bias_relu', "
            "8, 8, 8, 'sm_90', 'gpu', 0.0001, 'expert', 0.5, 'light', 1, 0, 3, '[]', 'done', "
            "'2026-11-29 00:00:00', 0, 0, 0, 0, 2)")
EVENT = ("INSERT INTO events ({id}campaign_id, seq, kind, payload, created_at) VALUES "
         "({value}'a', {seq}, 'note', '{{}}', '2026-11-29 00:00:00')")


def test_event_ids_are_64_bit_on_postgres(empty_db: str) -> None:
    url = empty_db
    engine = create_engine(url)
    try:
        upgrade_database(url, BEFORE)
        with engine.begin() as conn:
            conn.exec_driver_sql(CAMPAIGN)
            conn.exec_driver_sql(EVENT.format(id="", value="", seq=1))
        upgrade_database(url)
        with engine.begin() as conn:
            types = conn.exec_driver_sql(
                "SELECT data_type FROM information_schema.columns WHERE table_name = 'events' "
                "AND column_name = 'id'").scalar_one()
            sequence = conn.exec_driver_sql(
                "SELECT data_type FROM information_schema.sequences "
                "WHERE sequence_name = 'events_id_seq'").scalar_one()
            assert (types, sequence) == ("bigint", "bigint")
            conn.exec_driver_sql("SELECT setval('events_id_seq', 3000000000)")
            conn.exec_driver_sql(EVENT.format(id="", value="", seq=2))  # numbered past 2^31
            ids = [r[0] for r in conn.exec_driver_sql("SELECT id FROM events ORDER BY id")]
            assert ids == [1, 3000000001]
            assert conn.exec_driver_sql(
                "SELECT count(*) FROM events WHERE id > 9223372036854775806").scalar_one() == 0
            conn.exec_driver_sql("DELETE FROM events WHERE id > 2147483647")
            conn.exec_driver_sql("SELECT setval('events_id_seq', 1)")
        downgrade_database(url, BEFORE)
        with engine.connect() as conn:
            assert conn.exec_driver_sql(
                "SELECT data_type FROM information_schema.columns WHERE table_name = 'events' "
                "AND column_name = 'id'").scalar_one() == "integer"
            assert [r[0] for r in conn.exec_driver_sql("SELECT id FROM events")] == [1]
        upgrade_database(url)
    finally:
        engine.dispose()


def test_the_migration_leaves_sqlite_as_it_is(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    upgrade_database(url, AFTER)
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(CAMPAIGN)
            conn.exec_driver_sql(EVENT.format(id="id, ", value="3000000000, ", seq=1))
            conn.exec_driver_sql(EVENT.format(id="", value="", seq=2))  # autoincrements
            ids = [r[0] for r in conn.exec_driver_sql("SELECT id FROM events ORDER BY id")]
        assert ids == [3000000000, 3000000001]
        downgrade_database(url, BEFORE)
        upgrade_database(url, AFTER)
    finally:
        engine.dispose()
