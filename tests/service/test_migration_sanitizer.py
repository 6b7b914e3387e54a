"""The sanitizer gate's migration on PostgreSQL: up with rows in the table, down, up again."""

from __future__ import annotations

from sanitize_support import migration_round_trip

from service.service_stack import create_database, drop_database


def test_the_sanitizer_migration_round_trips_on_postgres() -> None:
    url = create_database("tuneforge_sanitize_migrate")
    try:
        migration_round_trip(url)
    finally:
        drop_database(url)
