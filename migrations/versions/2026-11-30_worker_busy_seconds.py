"""worker_heartbeats.busy_seconds: the seconds a worker spent on its evaluations

Revision ID: 20261130_worker_busy
Revises: 20261130_sanitizer
Create Date: 2026-11-30 12:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op


revision = '20261130_worker_busy'
down_revision = '20261130_sanitizer'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('worker_heartbeats', schema=None) as batch_op:
        batch_op.add_column(sa.Column('busy_seconds', sa.Float(), server_default='0',
                                      nullable=False))


def downgrade() -> None:
    with op.batch_alter_table('worker_heartbeats', schema=None) as batch_op:
        batch_op.drop_column('busy_seconds')
