"""families.retired_at and families.size_bytes: retiring a version, per-team quotas

A retired version stays readable (the campaigns that ran it keep their record) and is refused
to new campaigns; ``size_bytes`` is what the version's spec takes stored (its JSON text), which
the per-team quota on stored bytes adds up. Versions stored before get their size from their
spec's text, and are not retired.

Revision ID: 20261204_family_retire_and_size
Revises: 20261204_campaign_settle_after
Create Date: 2026-12-04 13:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '20261204_family_retire_and_size'
down_revision = '20261204_campaign_settle_after'
branch_labels = None
depends_on = None


def upgrade() -> None:
    # plain ALTER TABLE ADD COLUMN on both: a batch copy of the table on SQLite would lose its
    # expression index (uq_family_version)
    op.add_column('families', sa.Column('retired_at', sa.DateTime(timezone=True),
                                        nullable=True))
    op.add_column('families', sa.Column('size_bytes', sa.BigInteger(), nullable=False,
                                        server_default='0'))
    op.execute("UPDATE families SET size_bytes = length(CAST(spec AS TEXT))")


def downgrade() -> None:
    sqlite = op.get_bind().dialect.name == 'sqlite'
    if sqlite:  # the table is copied: its expression index is made again after
        op.drop_index('uq_family_version', table_name='families')
    with op.batch_alter_table('families') as batch:
        batch.drop_column('size_bytes')
        batch.drop_column('retired_at')
    if sqlite:
        op.create_index('uq_family_version', 'families',
                        [sa.text("coalesce(team_id, '')"), 'name', 'version'], unique=True)
