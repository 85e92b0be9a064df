"""provider_walks (issue 46): where beat's reconciliation sweep stands in each of Stripe's
lists. The sweep reads Stripe's customers and subscriptions a page (100) per call, a few
pages per run, instead of one object per call; its cursor, when its pass began, and when its
last completed pass began (the rows not read since were not listed: they are read one by
one) are kept here between runs, one row per list.

Revision ID: 0024
Revises: 0023
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "provider_walks",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("after", sa.String(length=255), nullable=True),
        sa.Column("pass_started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("completed_pass_started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_provider_walks")),
    )


def downgrade() -> None:
    op.drop_table("provider_walks")
