"""candidates.claimed_by and worker_nodes: which Celery worker holds a candidate

A worker killed outright (its main process too) holds its message until Redis's visibility
timeout; the reconciler gives back the candidates of a worker whose main process stopped
heartbeating.

Revision ID: 20261130_claims
Revises: 20261130_worker_busy
Create Date: 2026-11-30 18:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op


revision = '20261130_claims'
down_revision = '20261130_worker_busy'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('worker_nodes',
    sa.Column('node', sa.String(length=200), nullable=False),
    sa.Column('role', sa.String(length=16), nullable=False),
    sa.Column('host', sa.String(length=200), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('last_seen', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('node')
    )
    with op.batch_alter_table('candidates', schema=None) as batch_op:
        batch_op.add_column(sa.Column('claimed_by', sa.String(length=200), nullable=True))
        batch_op.create_index('ix_candidates_claimed_by', ['claimed_by'], unique=False,
                              postgresql_where=sa.text('claimed_by IS NOT NULL'),
                              sqlite_where=sa.text('claimed_by IS NOT NULL'))


def downgrade() -> None:
    with op.batch_alter_table('candidates', schema=None) as batch_op:
        batch_op.drop_index('ix_candidates_claimed_by')
        batch_op.drop_column('claimed_by')
    op.drop_table('worker_nodes')
