"""audit entries (issue 45): the operators' audit trail, one row per action taken from the
console, the operations API or the command line, written in the transaction of what it
changed.

Revision ID: 0018
Revises: 0017
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "audit_entries",
        sa.Column("id", sa.String(length=128), nullable=False),
        sa.Column("action", sa.String(length=64), nullable=False),
        sa.Column("operator", sa.String(length=128), nullable=False),
        sa.Column("surface", sa.String(length=16), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("targets", JSON, nullable=False),
        sa.Column("target_ids", sa.Text(), nullable=False),
        sa.Column("billing_account_id", sa.String(length=128), nullable=True),
        sa.Column("changes", JSON, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_entries")),
    )
    for column in ("action", "operator", "at", "billing_account_id"):
        op.create_index(f"ix_audit_entries_{column}", "audit_entries", [column], unique=False)


def downgrade() -> None:
    for column in ("action", "operator", "at", "billing_account_id"):
        op.drop_index(f"ix_audit_entries_{column}", table_name="audit_entries")
    op.drop_table("audit_entries")
