"""commands.running_since_wall_clock (issue 43): when a command's latest delivery began
running it, on the machine's clock. The stalled-command sweep publishes again a command
running longer than the broker's visibility timeout allows (its worker died and its message
was lost), and measures that in real time: the business clock can be moved forward
(``clock advance``), which made every running command look abandoned at once.

Revision ID: 0023
Revises: 0022
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A plain ADD COLUMN on both databases (nullable, no default): no table rewrite, however
    # many commands the log holds.
    op.add_column(
        "commands", sa.Column("running_since_wall_clock", sa.DateTime(timezone=True), nullable=True)
    )


def downgrade() -> None:
    with op.batch_alter_table("commands") as batch:
        batch.drop_column("running_since_wall_clock")
