"""families: one row per content key for embedded families too (uq_family_key on coalesce)

``uq_family_key`` was a plain unique constraint on ``(team_id, key)``. NULLs are distinct in a
unique constraint, so embedded families (no team) could store one content twice: two
registrations of the same spec at once both found nothing stored, and the second took the
next version number. The key is now unique per team with embedded families counted as one
team, through an index on ``coalesce(team_id, '')`` as ``uq_family_version`` is.

A database that already holds such a repeat keeps each key's first version and loses the
later ones: campaigns name a family by its key, which the kept row still answers.

Revision ID: 20261207_family_key_per_embedded
Revises: 20261204_family_retire_and_size
Create Date: 2026-12-07 07:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '20261207_family_key_per_embedded'
down_revision = '20261204_family_retire_and_size'
branch_labels = None
depends_on = None

VERSION_INDEX: list[str | sa.TextClause] = [sa.text("coalesce(team_id, '')"), 'name',
                                           'version']


def _plain_key_constraint(sqlite: bool, *, create: bool) -> None:
    """Drop the plain unique constraint ``uq_family_key`` (``create``: make it again). On
    SQLite that copies the table, which would lose its expression index ``uq_family_version``:
    the index is made again after the copy."""
    if sqlite:
        op.drop_index('uq_family_version', table_name='families')
        with op.batch_alter_table('families') as batch:
            if create:
                batch.create_unique_constraint('uq_family_key', ['team_id', 'key'])
            else:
                batch.drop_constraint('uq_family_key', type_='unique')
        op.create_index('uq_family_version', 'families', VERSION_INDEX, unique=True)
    elif create:
        op.create_unique_constraint('uq_family_key', 'families', ['team_id', 'key'])
    else:
        op.drop_constraint('uq_family_key', 'families', type_='unique')


def upgrade() -> None:
    sqlite = op.get_bind().dialect.name == 'sqlite'
    op.execute(
        "DELETE FROM families WHERE EXISTS (SELECT 1 FROM families AS first "
        "WHERE coalesce(first.team_id, '') = coalesce(families.team_id, '') "
        "AND first.key = families.key AND first.version < families.version)")
    _plain_key_constraint(sqlite, create=False)
    op.create_index('uq_family_key', 'families', [sa.text("coalesce(team_id, '')"), 'key'],
                    unique=True)


def downgrade() -> None:
    sqlite = op.get_bind().dialect.name == 'sqlite'
    op.drop_index('uq_family_key', table_name='families')
    _plain_key_constraint(sqlite, create=True)
