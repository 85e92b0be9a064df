"""deleted_accounts: a billing account whose Stripe customer was deleted reads ``deleted``
(issue 29): the accounts already found so (``customer_deleted_at`` set) take the state.
The column is a plain string and the live-account index covers ``pending`` and ``active``
only, so no schema change is needed.

Revision ID: 0015_deleted_accounts
Revises: 0014
"""

from __future__ import annotations

from alembic import op

revision = "0015_deleted_accounts"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "UPDATE billing_accounts SET state = 'deleted' "
        "WHERE customer_deleted_at IS NOT NULL AND state IN ('pending', 'active')"
    )


def downgrade() -> None:
    op.execute("UPDATE billing_accounts SET state = 'active' WHERE state = 'deleted'")
