"""failed commands whose error is the caller's mistake become rejected

Until this revision every command that ended in an error was ``failed``. Those whose error
is a caller's mistake (``domain.operations.outcomes``) become ``rejected``: they leave
``billing-worker commands failed``, the ``billing_failed_commands`` gauge and its alert, and
the rejected retention applies to them from their finish time. The rule is copied here as
it stands at this revision, so that this migration does what it did whatever the rule
becomes. Rows are read and updated in batches by primary key; a downgrade makes every
rejected command failed again (what the code of the previous revision knows).

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
BATCH = 1000
ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
# INVALID_ARGUMENT, NOT_FOUND, ALREADY_EXISTS, PERMISSION_DENIED, FAILED_PRECONDITION,
# OUT_OF_RANGE, UNAUTHENTICATED.
CALLERS_CODES = frozenset({3, 5, 6, 7, 9, 11, 16})
OPERATORS_REASONS = frozenset({"PROVIDER_NOT_CONFIGURED", "PROVIDER_SUBSCRIPTION_EXISTS"})

commands = sa.table(
    "commands",
    sa.column("id", sa.String(64)),
    sa.column("status", sa.String(16)),
    sa.column("error", JSON),
)


def is_callers_mistake(error: Any) -> bool:
    """``domain.operations.outcomes.is_callers_mistake`` as it stands at revision 0013."""
    if not isinstance(error, dict):
        return False
    try:
        code = int(error.get("code"))
    except (TypeError, ValueError):
        return False
    reasons = {
        detail.get("reason")
        for detail in error.get("details") or []
        if isinstance(detail, dict) and detail.get("@type") == ERROR_INFO
    }
    return code in CALLERS_CODES and not reasons & OPERATORS_REASONS


def upgrade() -> None:
    connection = op.get_bind()
    after = ""
    while True:
        rows = connection.execute(
            sa.select(commands.c.id, commands.c.error)
            .where(commands.c.status == "failed", commands.c.id > after)
            .order_by(commands.c.id)
            .limit(BATCH)
        ).all()
        if not rows:
            return
        rejected = [row.id for row in rows if is_callers_mistake(row.error)]
        if rejected:
            connection.execute(
                commands.update()
                .where(commands.c.id.in_(rejected), commands.c.status == "failed")
                .values(status="rejected")
            )
        after = rows[-1].id


def downgrade() -> None:
    op.execute(commands.update().where(commands.c.status == "rejected").values(status="failed"))
