"""families: the teams' own kernel families, one row per version of a declarative spec

A team registers its own kernel as a declarative spec (``kernels.userspec``); each distinct
content is a version (1, 2, … per team and name) stored whole with its hash and its content
key ``name@hash12``, which is what a campaign's ``kernel`` names. The version is unique per
team and name with embedded families (no team) counted as one team, through an index on
``coalesce(team_id, '')``. Downgrade drops the table, and refuses while a campaign still
names one of its families (it would name a family nobody can find).

Revision ID: 20261202_families
Revises: 20261201_dims
Create Date: 2026-12-02 00:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op


revision = '20261202_families'
down_revision = '20261201_dims'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'families',
        sa.Column('id', sa.String(length=32), nullable=False),
        sa.Column('team_id', sa.String(length=32), nullable=True),
        sa.Column('name', sa.String(length=64), nullable=False),
        sa.Column('version', sa.Integer(), nullable=False),
        sa.Column('spec_hash', sa.String(length=64), nullable=False),
        sa.Column('key', sa.String(length=64), nullable=False),
        sa.Column('spec', sa.JSON(), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('created_by', sa.String(length=100), nullable=True),
        sa.ForeignKeyConstraint(['team_id'], ['teams.id'], ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('team_id', 'key', name='uq_family_key'),
    )
    op.create_index('ix_families_team_id', 'families', ['team_id'])
    op.create_index('ix_families_key', 'families', ['key'])
    op.create_index('uq_family_version', 'families',
                    [sa.text("coalesce(team_id, '')"), 'name', 'version'], unique=True)


def downgrade() -> None:
    bind = op.get_bind()
    used = bind.execute(sa.text(
        "SELECT count(*) FROM campaigns WHERE kernel IN (SELECT key FROM families)")).scalar()
    if used:
        raise RuntimeError(f"cannot downgrade: {used} campaign(s) run a team's own family "
                           "(the families table is all that defines it)")
    op.drop_index('uq_family_version', table_name='families')
    op.drop_index('ix_families_key', table_name='families')
    op.drop_index('ix_families_team_id', table_name='families')
    op.drop_table('families')
