"""events.id as BIGINT: event ids (``?after=``, ``Last-Event-ID``) up to 2^63-1

The API takes any event id up to 2^63-1 as a stream's start point; with a 32-bit column a
start point of 2^31 or more broke the stream's query after its 200 (NumericValueOutOfRange),
and the id sequence would have run out at 2^31-1 events. PostgreSQL only: SQLite's INTEGER
PRIMARY KEY is 64-bit already. The way down fails if an id past 2^31-1 exists (it cannot be
kept in the narrower column).

Revision ID: 20261201_event_id_bigint
Revises: 20261130_event_seq
Create Date: 2026-12-01 20:00:00
"""

from __future__ import annotations

from alembic import op


revision = '20261201_event_id_bigint'
down_revision = '20261130_event_seq'
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name == 'postgresql':
        op.execute('ALTER TABLE events ALTER COLUMN id TYPE BIGINT')
        op.execute('ALTER SEQUENCE events_id_seq AS BIGINT')


def downgrade() -> None:
    if op.get_bind().dialect.name == 'postgresql':
        op.execute('ALTER SEQUENCE events_id_seq AS INTEGER')
        op.execute('ALTER TABLE events ALTER COLUMN id TYPE INTEGER')
