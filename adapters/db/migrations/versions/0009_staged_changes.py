"""staged plan changes: made at the provider ahead of their boundary, still pending here, with
the period they start

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

PENDING_BEFORE = sa.text("state IN ('scheduled', 'applying')")
PENDING = sa.text("state IN ('scheduled', 'applying', 'staged')")
INDEX = "uq_scheduled_changes_pending_subscription_id"


def upgrade() -> None:
    with op.batch_alter_table("scheduled_changes", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("staged_period_end", sa.DateTime(timezone=True), nullable=True)
        )
        batch_op.drop_index(INDEX, sqlite_where=PENDING_BEFORE, postgresql_where=PENDING_BEFORE)
        batch_op.create_index(
            INDEX, ["subscription_id"], unique=True, sqlite_where=PENDING, postgresql_where=PENDING
        )


def downgrade() -> None:
    with op.batch_alter_table("scheduled_changes", schema=None) as batch_op:
        batch_op.drop_index(INDEX, sqlite_where=PENDING, postgresql_where=PENDING)
        batch_op.create_index(
            INDEX,
            ["subscription_id"],
            unique=True,
            sqlite_where=PENDING_BEFORE,
            postgresql_where=PENDING_BEFORE,
        )
        batch_op.drop_column("staged_period_end")
