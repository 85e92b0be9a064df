"""what Stripe holds, followed: a subscription's cancel_at, when each row was last read from
Stripe (the reconciliation sweep's order), and a billing account whose customer was deleted

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("subscriptions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("cancel_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("synced_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.create_index("ix_subscriptions_synced_at", ["synced_at"], unique=False)
    with op.batch_alter_table("billing_accounts", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("customer_deleted_at", sa.DateTime(timezone=True), nullable=True)
        )
        batch_op.add_column(sa.Column("synced_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("billing_accounts", schema=None) as batch_op:
        batch_op.drop_column("synced_at")
        batch_op.drop_column("customer_deleted_at")
    with op.batch_alter_table("subscriptions", schema=None) as batch_op:
        batch_op.drop_index("ix_subscriptions_synced_at")
        batch_op.drop_column("synced_at")
        batch_op.drop_column("cancel_at")
