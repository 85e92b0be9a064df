"""pending plan changes indexed by kind (issue 46): beat's gauges find the earliest due change
of each kind among the pending ones, not by walking every pending change.

Revision ID: 0022
Revises: 0021
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

PENDING = "state IN ('scheduled', 'applying', 'staged')"


def upgrade() -> None:
    op.create_index(
        "ix_scheduled_changes_pending_kind",
        "scheduled_changes",
        ["kind", "effective_at", "state"],
        postgresql_where=sa.text(PENDING),
        sqlite_where=sa.text(PENDING),
        if_not_exists=True,
    )


def downgrade() -> None:
    op.drop_index("ix_scheduled_changes_pending_kind", table_name="scheduled_changes")
