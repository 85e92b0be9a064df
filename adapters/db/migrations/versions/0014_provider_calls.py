"""provider_calls: every call made to the billing provider for a command (its operation,
subject, idempotency key, attempt, outcome and error), for the operator's timeline
(``billing-worker accounts show``)

Revision ID: 0014
Revises: 0013
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "provider_calls",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("command_id", sa.String(length=64), nullable=True),
        sa.Column("operation", sa.String(length=64), nullable=False),
        sa.Column("subject", sa.String(length=200), nullable=True),
        sa.Column("idempotency_key", sa.String(length=255), nullable=True),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("duration_ms", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_provider_calls")),
    )
    with op.batch_alter_table("provider_calls", schema=None) as batch_op:
        for column in ("command_id", "subject", "idempotency_key", "started_at"):
            batch_op.create_index(
                batch_op.f(f"ix_provider_calls_{column}"), [column], unique=False
            )


def downgrade() -> None:
    op.drop_table("provider_calls")
