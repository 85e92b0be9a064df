"""change_previews: the previews answered lately, so that an immediate change may name a
preview's proration_date only for that very change and for a few minutes
(``domain/subscriptions/change_previews.py``)

Revision ID: 0015
Revises: 0014
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "change_previews",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("subscription_id", sa.String(length=128), nullable=False),
        sa.Column("from_plan_id", sa.String(length=128), nullable=False),
        sa.Column("plan_id", sa.String(length=128), nullable=False),
        sa.Column("proration_date", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_change_previews")),
    )
    with op.batch_alter_table("change_previews", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_change_previews_subscription_id"), ["subscription_id"], unique=False
        )


def downgrade() -> None:
    op.drop_table("change_previews")
