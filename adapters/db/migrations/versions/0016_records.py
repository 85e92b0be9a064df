"""records (issue 29): a billing account whose Stripe customer was deleted reads
``deleted`` (the accounts already found so, ``customer_deleted_at`` set, take the state; the
column is a plain string and the live-account index covers ``pending`` and ``active`` only,
so no index changes); and each subscription keeps the price Stripe bills as last read
(``billed_price_id``), which the off-plan gauge compares with its plan's.

Revision ID: 0016
Revises: 0015
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "UPDATE billing_accounts SET state = 'deleted' "
        "WHERE customer_deleted_at IS NOT NULL AND state IN ('pending', 'active')"
    )
    with op.batch_alter_table("subscriptions") as batch_op:
        batch_op.add_column(sa.Column("billed_price_id", sa.String(length=255), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("subscriptions") as batch_op:
        batch_op.drop_column("billed_price_id")
    op.execute("UPDATE billing_accounts SET state = 'active' WHERE state = 'deleted'")
