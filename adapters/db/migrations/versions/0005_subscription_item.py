"""the provider's item id of each subscription, and when a change was first sent: a plan
change is one provider call

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('subscriptions', schema=None) as batch_op:
        batch_op.add_column(sa.Column('provider_item_id', sa.String(length=255), nullable=True))
    with op.batch_alter_table('scheduled_changes', schema=None) as batch_op:
        batch_op.add_column(sa.Column('first_sent_at', sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('scheduled_changes', schema=None) as batch_op:
        batch_op.drop_column('first_sent_at')
    with op.batch_alter_table('subscriptions', schema=None) as batch_op:
        batch_op.drop_column('provider_item_id')
