"""the compute-sanitizer gate: candidates.sanitizer, campaigns.sanitize

Revision ID: 20261130_sanitizer
Revises: 20261129_0001
Create Date: 2026-11-30 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op


revision = '20261130_sanitizer'
down_revision = '20261129_0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('candidates', schema=None) as batch_op:
        batch_op.add_column(sa.Column('sanitizer', sa.JSON(), nullable=True))
    with op.batch_alter_table('campaigns', schema=None) as batch_op:
        batch_op.add_column(sa.Column('sanitize', sa.Boolean(), server_default=sa.false(),
                                      nullable=False))


def downgrade() -> None:
    with op.batch_alter_table('campaigns', schema=None) as batch_op:
        batch_op.drop_column('sanitize')
    with op.batch_alter_table('candidates', schema=None) as batch_op:
        batch_op.drop_column('sanitizer')
