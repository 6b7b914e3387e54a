"""events.seq and campaigns.event_seq: a gapless number per campaign for every event

The live event stream pushes events through Redis after their transaction commits; a reader
that knows each event's number within its campaign can tell a missed or late one from a
duplicate. Existing events are numbered in id order.

Revision ID: 20261130_event_seq
Revises: 20261130_claims
Create Date: 2026-11-30 20:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op


revision = '20261130_event_seq'
down_revision = '20261130_claims'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('campaigns', schema=None) as batch_op:
        batch_op.add_column(sa.Column('event_seq', sa.Integer(), server_default='0',
                                      nullable=False))
    with op.batch_alter_table('events', schema=None) as batch_op:
        batch_op.add_column(sa.Column('seq', sa.Integer(), nullable=True))
    if op.get_bind().dialect.name == 'postgresql':
        op.execute('UPDATE events SET seq = numbered.n FROM (SELECT id, row_number() OVER '
                   '(PARTITION BY campaign_id ORDER BY id) AS n FROM events) AS numbered '
                   'WHERE events.id = numbered.id')
    else:
        op.execute('UPDATE events SET seq = (SELECT count(*) FROM events AS earlier WHERE '
                   'earlier.campaign_id = events.campaign_id AND earlier.id <= events.id)')
    op.execute('UPDATE campaigns SET event_seq = (SELECT count(*) FROM events WHERE '
               'events.campaign_id = campaigns.id)')
    with op.batch_alter_table('events', schema=None) as batch_op:
        batch_op.alter_column('seq', existing_type=sa.Integer(), nullable=False)
        batch_op.create_unique_constraint('uq_event_seq', ['campaign_id', 'seq'])


def downgrade() -> None:
    with op.batch_alter_table('events', schema=None) as batch_op:
        batch_op.drop_constraint('uq_event_seq', type_='unique')
        batch_op.drop_column('seq')
    with op.batch_alter_table('campaigns', schema=None) as batch_op:
        batch_op.drop_column('event_seq')
