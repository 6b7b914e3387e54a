"""Engines and sessions; the schema comes from Alembic (``upgrade_database``)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.orm import Session, sessionmaker

MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    """Foreign keys on; the write-ahead log with ``synchronous=NORMAL``: a commit writes the
    log without waiting for the disk (the log is synced at its checkpoints), so a killed
    process loses nothing committed and the file is never corrupted, while an operating
    system crash or a power loss may roll back the last commits; other connections wait up
    to 30 s for a lock."""
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.close()


#: A pooled connection idle for longer than this is pinged before it is handed out.
PING_IDLE_S = 1.0


def _ping_if_idle(engine: Engine) -> None:
    """Ping a pooled connection before handing it out only when it has been idle for
    ``PING_IDLE_S``: a server restart or a dropped connection is found before the first
    statement fails, as with ``pool_pre_ping``, without a round trip for a connection that a
    busy worker gave back a few milliseconds ago (pinging every checkout cost a worker's step
    a third of its database time)."""

    @event.listens_for(engine, "checkin")
    def _checked_in(_dbapi_conn: Any, record: Any) -> None:
        record.info["tuneforge.checked_in"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _checkout(dbapi_conn: Any, record: Any, _proxy: Any) -> None:
        since = record.info.get("tuneforge.checked_in")
        if since is None or time.monotonic() - since < PING_IDLE_S:
            return  # a new connection, or one in use a moment ago
        try:
            engine.dialect.do_ping(dbapi_conn)
        except engine.dialect.loaded_dbapi.Error as err:
            # the pool drops this connection and hands out another (a new one if need be)
            raise DisconnectionError(f"a pooled connection failed its ping: {err}") from err


def ensure_sqlite_dir(url: str) -> None:
    """Create the folder of an SQLite file URL (SQLite creates the file, not its folder: the
    embedded default, ``~/.tuneforge/tuneforge.db``, has none on a fresh machine)."""
    if url.startswith("sqlite"):
        path = url.split("///", 1)[-1]
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)


@lru_cache(maxsize=16)
def get_engine(url: str) -> Engine:
    """One engine per URL; SQLite gets WAL and a busy timeout for its worker threads."""
    if url.startswith("sqlite"):
        ensure_sqlite_dir(url)
        engine = create_engine(url, connect_args={"check_same_thread": False})
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    engine = create_engine(url, pool_size=10, max_overflow=20)
    _ping_if_idle(engine)
    return engine


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


#: the newest migration's revision (``tests/test_migrations.py`` holds it to Alembic's head):
#: a database already there is not handed to Alembic, whose import alone takes about half a
#: second of every command's start
HEAD_REVISION = "20261207_family_key_per_embedded"


def database_revision(url: str) -> str | None:
    """The revision an existing database is at (its ``alembic_version``), or None where it
    has none or cannot be read (a new file, no table yet): Alembic then decides."""
    if url.startswith("sqlite"):
        path = url.split("///", 1)[-1]
        if not path or path == ":memory:" or not Path(path).is_file():
            return None
    try:
        with get_engine(url).connect() as conn:
            rows = conn.exec_driver_sql("SELECT version_num FROM alembic_version").all()
    except Exception:  # noqa: BLE001 - no table, no database: Alembic reports what is wrong
        return None
    return rows[0][0] if len(rows) == 1 else None


def upgrade_database(url: str, revision: str = "head") -> None:
    """Run the migrations up to ``revision`` (the only way the schema is created); nothing
    to do for a database already at the head (:data:`HEAD_REVISION`)."""
    if revision == "head" and database_revision(url) == HEAD_REVISION:
        return
    from alembic import command

    ensure_sqlite_dir(url)  # Alembic opens its own connection, before any engine of ours
    command.upgrade(alembic_config(url), revision)


def downgrade_database(url: str, revision: str = "base") -> None:
    """Run the migrations down to ``revision``."""
    from alembic import command

    command.downgrade(alembic_config(url), revision)
