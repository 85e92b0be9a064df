"""billing accounts; retry history of commands

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
LIVE = sa.text("state IN ('pending', 'active')")

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('billing_accounts',
    sa.Column('id', sa.String(length=128), nullable=False),
    sa.Column('org_id', sa.String(length=128), nullable=False),
    sa.Column('name', sa.String(length=256), nullable=False),
    sa.Column('email', sa.String(length=320), nullable=False),
    sa.Column('phone', sa.String(length=32), nullable=False),
    sa.Column('address', JSON, nullable=False),
    sa.Column('currency', sa.String(length=3), nullable=False),
    sa.Column('tax_data', JSON, nullable=False),
    sa.Column('metadata', JSON, nullable=False),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('provider', sa.String(length=32), nullable=True),
    sa.Column('provider_id', sa.String(length=255), nullable=True),
    sa.Column('registration_key', sa.String(length=255), nullable=True),
    sa.Column('registration_started_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['org_id'], ['organizations.id'], name=op.f('fk_billing_accounts_org_id_organizations')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_billing_accounts')),
    sa.UniqueConstraint('provider_id', name=op.f('uq_billing_accounts_provider_id'))
    )
    with op.batch_alter_table('billing_accounts', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_billing_accounts_org_id'), ['org_id'], unique=False)
        batch_op.create_index('uq_billing_accounts_live_org_id', ['org_id'], unique=True, sqlite_where=LIVE, postgresql_where=LIVE)

    with op.batch_alter_table('commands', schema=None) as batch_op:
        batch_op.add_column(sa.Column('retries', JSON, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('commands', schema=None) as batch_op:
        batch_op.drop_column('retries')
    with op.batch_alter_table('billing_accounts', schema=None) as batch_op:
        batch_op.drop_index('uq_billing_accounts_live_org_id', sqlite_where=LIVE, postgresql_where=LIVE)
        batch_op.drop_index(batch_op.f('ix_billing_accounts_org_id'))
    op.drop_table('billing_accounts')
