"""Alembic environment: the URL comes from the config (``core.db.alembic_config``) or settings."""

from __future__ import annotations

from alembic import context
from sqlalchemy import engine_from_config, pool

from core.models import Base
from core.settings import get_settings

config = context.config
url = config.get_main_option("sqlalchemy.url") or get_settings().effective_database_url
target_metadata = Base.metadata


def run_offline() -> None:
    """Emit SQL without a connection."""
    context.configure(url=url, target_metadata=target_metadata, literal_binds=True,
                      render_as_batch=url.startswith("sqlite"))
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    """Run against the database."""
    engine = engine_from_config({"sqlalchemy.url": url}, prefix="sqlalchemy.",
                                poolclass=pool.NullPool)
    with engine.connect() as connection:
        context.configure(connection=connection, target_metadata=target_metadata,
                          render_as_batch=url.startswith("sqlite"))
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
