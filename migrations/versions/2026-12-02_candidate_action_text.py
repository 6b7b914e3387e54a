"""candidates.action as TEXT: the expert's widened moves chain many transforms

A two-step or wider move is stored as its actions joined by " ; ", and a move from the SIMT
kernel's end chains eight of them (about 230 characters): on PostgreSQL the VARCHAR(200) column
refused the candidate and the campaign failed with StringDataRightTruncation. SQLite does not
enforce the length. The way down truncates nothing: it fails if a longer action is stored.

Revision ID: 20261202_candidate_action_text
Revises: 20261202_families
Create Date: 2026-12-02 08:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '20261202_candidate_action_text'
down_revision = '20261202_families'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('candidates') as batch:
        batch.alter_column('action', type_=sa.Text(), existing_type=sa.String(200),
                           existing_nullable=True)


def downgrade() -> None:
    with op.batch_alter_table('candidates') as batch:
        batch.alter_column('action', type_=sa.String(200), existing_type=sa.Text(),
                           existing_nullable=True)
