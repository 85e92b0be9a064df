"""an index on the billing accounts' state and creation time: beat finds the accounts stuck
pending (its re-drive, its gauge) without reading every account

On PostgreSQL the index is built concurrently, so that migrating never blocks the API and the
workers writing accounts.

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

INDEX = "ix_billing_accounts_state_created_at"


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        with op.get_context().autocommit_block():
            op.create_index(
                INDEX, "billing_accounts", ["state", "created_at"], postgresql_concurrently=True
            )
        return
    with op.batch_alter_table("billing_accounts", schema=None) as batch_op:
        batch_op.create_index(INDEX, ["state", "created_at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("billing_accounts", schema=None) as batch_op:
        batch_op.drop_index(INDEX)
