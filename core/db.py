"""Engines and sessions; the schema comes from Alembic (``upgrade_database``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker

MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.close()


@lru_cache(maxsize=16)
def get_engine(url: str) -> Engine:
    """One engine per URL; SQLite gets WAL and a busy timeout for its worker threads."""
    if url.startswith("sqlite"):
        path = url.split("///", 1)[-1]
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"check_same_thread": False})
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    return create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=20)


@lru_cache(maxsize=16)
def session_factory(url: str) -> sessionmaker[Session]:
    """A sessionmaker bound to the engine of ``url`` (one per URL: building one defines a
    Session subclass, about a millisecond, which every short transaction of a worker paid)."""
    return sessionmaker(get_engine(url), expire_on_commit=False)


@lru_cache(maxsize=16)
def autocommit_factory(url: str) -> sessionmaker[Session]:
    """Sessions on the same pool whose every statement commits on its own: no ``BEGIN`` and
    ``COMMIT`` round trips, for steps whose statements need no transaction around them."""
    return sessionmaker(get_engine(url).execution_options(isolation_level="AUTOCOMMIT"),
                        expire_on_commit=False)


@contextmanager
def autocommit_scope(url: str) -> Iterator[Session]:
    """A session whose statements each commit as they run (see :func:`autocommit_factory`)."""
    session = autocommit_factory(url)()
    try:
        yield session
    finally:
        session.close()


@contextmanager
def session_scope(url: str) -> Iterator[Session]:
    """A session committed on success, rolled back on error."""
    session = session_factory(url)()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def alembic_config(url: str) -> Any:
    """Alembic configuration pointing at ``migrations/`` and ``url``."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def upgrade_database(url: str, revision: str = "head") -> None:
    """Run the migrations up to ``revision`` (the only way the schema is created)."""
    from alembic import command

    command.upgrade(alembic_config(url), revision)


def downgrade_database(url: str, revision: str = "base") -> None:
    """Run the migrations down to ``revision``."""
    from alembic import command

    command.downgrade(alembic_config(url), revision)
