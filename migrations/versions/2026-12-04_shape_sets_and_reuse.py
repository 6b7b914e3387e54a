"""shape sets, and measurements served from history

A shape set (``shape_sets``) is one job over several shapes of a family: one member campaign a
shape (``campaigns.set_id``, ``set_index``, ``weight``), run under the set's one budget. Every
candidate carries the key of its evaluation (``evaluation_key``: everything that can change its
result); a second request for the same evaluation in the team is served from the first
(``served_from``), and keeps the interleaved runs of the incumbent it was measured against
(``incumbent_runs``) so that a decision served from history is the one that was taken.
``campaigns.reuse`` false forces fresh measurements; ``campaigns.commit`` names the tuneforge
that ran the campaign (a library entry's provenance).

Revision ID: 20261204_shape_sets_and_reuse
Revises: 20261202_candidate_action_text
Create Date: 2026-12-04 04:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '20261204_shape_sets_and_reuse'
down_revision = '20261202_candidate_action_text'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'shape_sets',
        sa.Column('id', sa.String(32), primary_key=True),
        sa.Column('team_id', sa.String(32), sa.ForeignKey('teams.id'), nullable=True,
                  index=True),
        sa.Column('kernel', sa.String(64), nullable=False),
        sa.Column('status', sa.String(16), nullable=False, server_default='queued'),
        sa.Column('status_reason', sa.Text(), nullable=True),
        sa.Column('budget_iterations', sa.Integer(), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('started_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    )
    with op.batch_alter_table('campaigns') as batch:
        batch.add_column(sa.Column('set_id', sa.String(32), nullable=True))
        batch.add_column(sa.Column('set_index', sa.Integer(), nullable=True))
        batch.add_column(sa.Column('weight', sa.Float(), nullable=False,
                                   server_default='1.0'))
        batch.add_column(sa.Column('reuse', sa.Boolean(), nullable=False,
                                   server_default=sa.true()))
        batch.add_column(sa.Column('commit', sa.String(64), nullable=True))
        batch.create_foreign_key('fk_campaigns_set_id', 'shape_sets', ['set_id'], ['id'],
                                 ondelete='CASCADE')
        batch.create_index('ix_campaigns_set_id', ['set_id'])
    with op.batch_alter_table('candidates') as batch:
        batch.add_column(sa.Column('evaluation_key', sa.String(64), nullable=True))
        batch.add_column(sa.Column('served_from', sa.String(32), nullable=True))
        batch.add_column(sa.Column('incumbent_runs', sa.JSON(), nullable=True))
        batch.create_index('ix_candidates_evaluation_key', ['evaluation_key'])


def downgrade() -> None:
    with op.batch_alter_table('candidates') as batch:
        batch.drop_index('ix_candidates_evaluation_key')
        batch.drop_column('incumbent_runs')
        batch.drop_column('served_from')
        batch.drop_column('evaluation_key')
    with op.batch_alter_table('campaigns') as batch:
        batch.drop_index('ix_campaigns_set_id')
        batch.drop_constraint('fk_campaigns_set_id', type_='foreignkey')
        batch.drop_column('commit')
        batch.drop_column('reuse')
        batch.drop_column('weight')
        batch.drop_column('set_index')
        batch.drop_column('set_id')
    op.drop_table('shape_sets')
