"""renewal checks (issue 41): the check of each renewal a plan change at the period's end took
effect at, read from Stripe's renewal invoice by the reconciliation sweep; the periods billed
wrong are the ``billing_renewals_billed_wrong`` gauge.

Revision ID: 0017
Revises: 0016
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "renewal_checks",
        sa.Column("id", sa.String(length=128), nullable=False),
        sa.Column("subscription_id", sa.String(length=128), nullable=False),
        sa.Column("plan_id", sa.String(length=128), nullable=False),
        sa.Column("period_start", sa.DateTime(timezone=True), nullable=False),
        sa.Column("due_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("checks", sa.Integer(), nullable=False),
        sa.Column("finding", sa.Text(), nullable=True),
        sa.Column("checked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["id"],
            ["scheduled_changes.id"],
            name=op.f("fk_renewal_checks_id_scheduled_changes"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_renewal_checks")),
    )
    op.create_index(
        "ix_renewal_checks_state_due_at", "renewal_checks", ["state", "due_at"], unique=False
    )


def downgrade() -> None:
    op.drop_index("ix_renewal_checks_state_due_at", table_name="renewal_checks")
    op.drop_table("renewal_checks")
