"""The sanitizer gate's migration checked the same way on SQLite (``tests/test_sanitize.py``)
and on PostgreSQL (``tests/service/test_migration_sanitizer.py``)."""

from __future__ import annotations

from sqlalchemy import create_engine, inspect

from core.db import downgrade_database, upgrade_database

BEFORE = "20261129_0001"


def migration_round_trip(url: str) -> None:
    """Up from the revision before the gate with a campaign in the table, down, up again: the
    columns come and go, the row stays, and an existing campaign did not ask for the gate."""
    upgrade_database(url, BEFORE)
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(
                "INSERT INTO campaigns (id, kernel, m, n, k, arch, backend, tolerance, policy, "
                "accept_threshold_pct, profile, parallel, seed, budget_iterations, "
                "injected_actions, status, created_at, evaluations, gpu_seconds, "
                "last_accept_iteration, next_iteration) VALUES ('c1', 'gemm_bias_relu', 8, 8, "
                "8, 'sm_90', 'gpu', 0.0001, 'expert', 0.5, 'light', 1, 0, 3, '[]', 'done', "
                "'2026-11-29 00:00:00', 0, 0, 0, 0)")

        def columns(table: str) -> set[str]:
            return {c["name"] for c in inspect(engine).get_columns(table)}

        assert "sanitize" not in columns("campaigns")
        assert "sanitizer" not in columns("candidates")
        upgrade_database(url)
        assert "sanitize" in columns("campaigns")
        assert "sanitizer" in columns("candidates")
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT sanitize FROM campaigns").scalar() in (0, False)
        downgrade_database(url, BEFORE)
        assert "sanitize" not in columns("campaigns")
        assert "sanitizer" not in columns("candidates")
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT id FROM campaigns").scalar() == "c1"
        upgrade_database(url)  # and up again: nothing was left behind to collide with
        assert "sanitizer" in columns("candidates")
    finally:
        engine.dispose()
