"""plan changes awaiting the customer's payment (issue 44): an immediate upgrade whose invoice
needs the customer's authentication is held at Stripe as a pending update; the change keeps
where the customer pays and when Stripe drops it, and counts as the subscription's pending
change meanwhile (the partial indexes of pending changes take the new state in).

Revision ID: 0025
Revises: 0024
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None

PENDING_BEFORE = sa.text("state IN ('scheduled', 'applying', 'staged')")
PENDING = sa.text("state IN ('scheduled', 'applying', 'staged', 'awaiting_payment')")
ONE_PENDING = "uq_scheduled_changes_pending_subscription_id"
PENDING_KIND = "ix_scheduled_changes_pending_kind"


def _pending_indexes(where: sa.TextClause) -> None:
    op.create_index(
        ONE_PENDING,
        "scheduled_changes",
        ["subscription_id"],
        unique=True,
        sqlite_where=where,
        postgresql_where=where,
    )
    op.create_index(
        PENDING_KIND,
        "scheduled_changes",
        ["kind", "effective_at", "state"],
        sqlite_where=where,
        postgresql_where=where,
    )


def _drop_pending_indexes() -> None:
    op.drop_index(ONE_PENDING, table_name="scheduled_changes")
    op.drop_index(PENDING_KIND, table_name="scheduled_changes")


def upgrade() -> None:
    # Plain ADD COLUMNs (nullable, no default) and index rebuilds: no table rewrite.
    op.add_column("scheduled_changes", sa.Column("payment_url", sa.String(2048), nullable=True))
    op.add_column(
        "scheduled_changes",
        sa.Column("payment_expires_at", sa.DateTime(timezone=True), nullable=True),
    )
    _drop_pending_indexes()
    _pending_indexes(PENDING)


def downgrade() -> None:
    _drop_pending_indexes()
    _pending_indexes(PENDING_BEFORE)
    with op.batch_alter_table("scheduled_changes") as batch:
        batch.drop_column("payment_expires_at")
        batch.drop_column("payment_url")
