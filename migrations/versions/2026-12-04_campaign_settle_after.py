"""campaigns.settle_after: a campaign that has settled ends before its budget

A campaign ends once it has gone ``settle_after`` evaluations without an accepted improvement
and every point one transform from its incumbent is evaluated (``agent.engine.lifecycle``).
Campaigns made before the setting get 0: they run until a budget is spent, as they did.

Revision ID: 20261204_campaign_settle_after
Revises: 20261204_shape_sets_and_reuse
Create Date: 2026-12-04 12:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '20261204_campaign_settle_after'
down_revision = '20261204_shape_sets_and_reuse'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('campaigns') as batch:
        batch.add_column(sa.Column('settle_after', sa.Integer(), nullable=False,
                                   server_default='0'))


def downgrade() -> None:
    with op.batch_alter_table('campaigns') as batch:
        batch.drop_column('settle_after')
