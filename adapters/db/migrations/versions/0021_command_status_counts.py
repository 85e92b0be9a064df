"""commands counted by status as they change (issue 46): failed and rejected commands are
counted by triggers on ``commands`` into ``command_status_counts``, not counted on read at
every scrape (``adapters/db/status_counts.py``).

Revision ID: 0021
Revises: 0020
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from adapters.db import status_counts

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "command_status_counts",
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("count", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("status", name=op.f("pk_command_status_counts")),
    )
    dialect = op.get_bind().dialect.name
    # The triggers first, then the count, in one transaction: on PostgreSQL making a trigger
    # holds writers of the log back until the count is committed, so none is missed.
    status_counts.install(op.execute, dialect)
    status_counts.recount(op.execute)


def downgrade() -> None:
    status_counts.uninstall(op.execute, op.get_bind().dialect.name)
    op.drop_table("command_status_counts")
