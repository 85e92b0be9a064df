"""an index on the commands' status and finish time: pruning the log finds the oldest cheaply

On PostgreSQL the index is built concurrently, so that migrating a large log never blocks
the API and the workers writing to it.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

from alembic import op

revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None

INDEX = 'ix_commands_status_finished_at'


def upgrade() -> None:
    if op.get_bind().dialect.name == 'postgresql':
        with op.get_context().autocommit_block():
            op.create_index(
                INDEX, 'commands', ['status', 'finished_at'], postgresql_concurrently=True
            )
        return
    with op.batch_alter_table('commands', schema=None) as batch_op:
        batch_op.create_index(INDEX, ['status', 'finished_at'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('commands', schema=None) as batch_op:
        batch_op.drop_index(INDEX)
