"""Alembic migrations on an empty PostgreSQL database: up to head, down to base, up again."""

from __future__ import annotations

from sqlalchemy import create_engine, inspect

from core.db import downgrade_database, upgrade_database
from core.models import Base


def tables(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_migrations_upgrade_and_downgrade_cleanly(empty_db: str) -> None:
    assert tables(empty_db) == set()
    upgrade_database(empty_db)
    assert tables(empty_db) == {*Base.metadata.tables, "alembic_version"}
    downgrade_database(empty_db)
    assert tables(empty_db) == {"alembic_version"}
    upgrade_database(empty_db)  # and back: nothing was left behind to collide with
    assert tables(empty_db) == {*Base.metadata.tables, "alembic_version"}


def test_the_models_match_the_migrated_schema(empty_db: str) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    upgrade_database(empty_db)
    engine = create_engine(empty_db)
    try:
        with engine.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    finally:
        engine.dispose()
    assert diff == []
