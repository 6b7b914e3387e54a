"""campaigns.dims: the problem's dimensions as one JSON object named by the family

Campaigns stored GEMM dimensions in three columns (m, n, k). A family declares its own
dimensions (a softmax has rows and cols), so they are stored once, as JSON keyed by the
family's dimension names; existing rows (every one a GEMM) become {"m": m, "n": n, "k": k}.
Downgrade restores the three columns, and refuses while a campaign's dims lack m, n or k.

Revision ID: 20261201_dims
Revises: 20261201_event_id_bigint
Create Date: 2026-12-01 20:00:00
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op


revision = '20261201_dims'
down_revision = '20261201_event_id_bigint'
branch_labels = None
depends_on = None

campaigns = sa.table('campaigns', sa.column('id', sa.String()), sa.column('m', sa.Integer()),
                     sa.column('n', sa.Integer()), sa.column('k', sa.Integer()),
                     sa.column('dims', sa.JSON()))


def upgrade() -> None:
    with op.batch_alter_table('campaigns', schema=None) as batch_op:
        batch_op.add_column(sa.Column('dims', sa.JSON(), nullable=True))
    bind = op.get_bind()
    rows = bind.execute(sa.select(campaigns.c.id, campaigns.c.m, campaigns.c.n,
                                  campaigns.c.k)).all()
    for row in rows:
        bind.execute(campaigns.update().where(campaigns.c.id == row.id)
                     .values(dims={"m": row.m, "n": row.n, "k": row.k}))
    with op.batch_alter_table('campaigns', schema=None) as batch_op:
        batch_op.alter_column('dims', existing_type=sa.JSON(), nullable=False)
        batch_op.drop_column('m')
        batch_op.drop_column('n')
        batch_op.drop_column('k')


def downgrade() -> None:
    bind = op.get_bind()
    rows = bind.execute(sa.select(campaigns.c.id, campaigns.c.dims)).all()
    decoded = [(row.id, row.dims if isinstance(row.dims, dict) else json.loads(row.dims))
               for row in rows]
    other = [cid for cid, dims in decoded if not {'m', 'n', 'k'} <= set(dims)]
    if other:
        raise RuntimeError(f"cannot downgrade: {len(other)} campaign(s) have dimensions other "
                           f"than m, n, k (first: {other[0]})")
    with op.batch_alter_table('campaigns', schema=None) as batch_op:
        for name in ('m', 'n', 'k'):
            batch_op.add_column(sa.Column(name, sa.Integer(), nullable=True))
    for cid, dims in decoded:
        bind.execute(campaigns.update().where(campaigns.c.id == cid)
                     .values(m=dims['m'], n=dims['n'], k=dims['k']))
    with op.batch_alter_table('campaigns', schema=None) as batch_op:
        for name in ('m', 'n', 'k'):
            batch_op.alter_column(name, existing_type=sa.Integer(), nullable=False)
        batch_op.drop_column('dims')
