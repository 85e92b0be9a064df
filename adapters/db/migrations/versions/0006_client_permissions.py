"""API clients hold scopes and may be limited to organizations

Clients created before permissions existed keep what they could do: every scope, in every
organization.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
EVERY_SCOPE_BEFORE_PERMISSIONS = [
    "billing:create",
    "billing:register",
    "commands:read",
    "subscriptions:change",
    "users:enable",
]

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('api_clients', schema=None) as batch_op:
        batch_op.add_column(sa.Column('scopes', JSON, nullable=True))
        batch_op.add_column(sa.Column('org_ids', JSON, nullable=True))
        batch_op.add_column(sa.Column('updated_at', sa.DateTime(timezone=True), nullable=True))
    clients = sa.table('api_clients', sa.column('scopes', JSON))
    op.execute(clients.update().values(scopes=EVERY_SCOPE_BEFORE_PERMISSIONS))
    with op.batch_alter_table('api_clients', schema=None) as batch_op:
        batch_op.alter_column('scopes', existing_type=JSON, nullable=False)


def downgrade() -> None:
    with op.batch_alter_table('api_clients', schema=None) as batch_op:
        batch_op.drop_column('updated_at')
        batch_op.drop_column('org_ids')
        batch_op.drop_column('scopes')
