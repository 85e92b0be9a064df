"""indexes for the console's search (issue 45): a billing account found by its whole name or
its whole email address reads one index, not the whole table.

Revision ID: 0019
Revises: 0018
"""

from __future__ import annotations

from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_billing_accounts_name", "billing_accounts", ["name"])
    op.create_index("ix_billing_accounts_email", "billing_accounts", ["email"])


def downgrade() -> None:
    op.drop_index("ix_billing_accounts_email", table_name="billing_accounts")
    op.drop_index("ix_billing_accounts_name", table_name="billing_accounts")
