"""The sanitizer gate's migration on PostgreSQL: up with rows in the table, down, up again."""

from __future__ import annotations

from sanitize_support import migration_round_trip


def test_the_sanitizer_migration_round_trips_on_postgres(empty_db: str) -> None:
    migration_round_trip(empty_db)
