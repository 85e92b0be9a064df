"""discounts and schedules at Stripe (issue 44): a subscription keeps, as last read, the
discounts Stripe takes off its price (a coupon redeemed in the dashboard), in words, and the
subscription schedule that manages it there (made in the dashboard); a partial index on the
few with a discount serves the discounted gauge.

Revision ID: 0026
Revises: 0025
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None

DISCOUNTED = sa.text("billed_discount IS NOT NULL")
INDEX = "ix_subscriptions_discounted_state"


def upgrade() -> None:
    # Plain ADD COLUMNs (nullable, no default) and an index of no rows yet: no table rewrite.
    op.add_column("subscriptions", sa.Column("billed_discount", sa.String(500), nullable=True))
    op.add_column(
        "subscriptions", sa.Column("provider_schedule_id", sa.String(255), nullable=True)
    )
    op.create_index(
        INDEX, "subscriptions", ["state"], sqlite_where=DISCOUNTED, postgresql_where=DISCOUNTED
    )


def downgrade() -> None:
    op.drop_index(INDEX, table_name="subscriptions")
    with op.batch_alter_table("subscriptions") as batch:
        batch.drop_column("provider_schedule_id")
        batch.drop_column("billed_discount")
