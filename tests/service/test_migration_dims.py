"""The campaigns.dims migration: m, n, k become the family's dims JSON on PostgreSQL and SQLite,
rows kept; the way down restores the columns, and refuses while a campaign's dims are not m, n,
k (a softmax's rows and cols have nowhere to go)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine

from core.db import downgrade_database, upgrade_database

BEFORE = "20261201_event_id_bigint"
CAMPAIGN = ("INSERT INTO campaigns (id, kernel, m, n, k, arch, backend, tolerance, policy, "
            "accept_threshold_pct, profile, parallel, seed, budget_iterations, "
            "injected_actions, status, created_at, evaluations, gpu_seconds, "
            "last_accept_iteration, next_iteration, event_seq) VALUES ('{id}', "
            "'gemm_bias_relu', {m}, {n}, {k}, 'sm_90', 'gpu', 0.0001, 'expert', 0.5, 'light', 1, "
            "0, 3, '[]', 'done', '2026-11-29 00:00:00', 0, 0, 0, 0, 0)")


def round_trip(url: str) -> None:
    upgrade_database(url, BEFORE)
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(CAMPAIGN.format(id="a", m=4096, n=2048, k=1024))
            conn.exec_driver_sql(CAMPAIGN.format(id="b", m=1, n=7, k=65536))
        upgrade_database(url)
        with engine.begin() as conn:
            found = conn.exec_driver_sql("SELECT id, dims FROM campaigns").all()
            rows: dict[str, Any] = dict(found)
            dims = {k: v if isinstance(v, dict) else json.loads(v) for k, v in rows.items()}
            assert dims == {"a": {"m": 4096, "n": 2048, "k": 1024},
                            "b": {"m": 1, "n": 7, "k": 65536}}
            conn.exec_driver_sql(
                "UPDATE campaigns SET kernel = 'softmax', dims = '{\"rows\": 8, \"cols\": 9}' "
                "WHERE id = 'b'")
        with pytest.raises(RuntimeError, match="dimensions other than m, n, k"):
            downgrade_database(url, BEFORE)
        with engine.begin() as conn:
            conn.exec_driver_sql("DELETE FROM campaigns WHERE id = 'b'")
        downgrade_database(url, BEFORE)
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT id, m, n, k FROM campaigns").all() == [
                ("a", 4096, 2048, 1024)]
        upgrade_database(url)
    finally:
        engine.dispose()


def test_dims_on_sqlite(tmp_path: Path) -> None:
    round_trip(f"sqlite:///{tmp_path / 'm.db'}")


def test_dims_on_postgres(empty_db: str) -> None:
    round_trip(empty_db)
