"""plans, subscriptions, scheduled plan changes

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

PENDING = sa.text("state IN ('scheduled', 'applying')")

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('plans',
    sa.Column('id', sa.String(length=128), nullable=False),
    sa.Column('name', sa.String(length=64), nullable=False),
    sa.Column('title', sa.String(length=255), nullable=False),
    sa.Column('interval', sa.String(length=8), nullable=False),
    sa.Column('amount', sa.Integer(), nullable=False),
    sa.Column('currency', sa.String(length=3), nullable=False),
    sa.Column('active', sa.Boolean(), nullable=False),
    sa.Column('provider', sa.String(length=32), nullable=True),
    sa.Column('provider_product_id', sa.String(length=255), nullable=True),
    sa.Column('provider_price_id', sa.String(length=255), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_plans')),
    sa.UniqueConstraint('name', name=op.f('uq_plans_name')),
    sa.UniqueConstraint('provider_price_id', name=op.f('uq_plans_provider_price_id'))
    )
    op.create_table('subscriptions',
    sa.Column('id', sa.String(length=128), nullable=False),
    sa.Column('billing_account_id', sa.String(length=128), nullable=False),
    sa.Column('plan_id', sa.String(length=128), nullable=False),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('provider', sa.String(length=32), nullable=False),
    sa.Column('provider_id', sa.String(length=255), nullable=False),
    sa.Column('current_period_start', sa.DateTime(timezone=True), nullable=False),
    sa.Column('current_period_end', sa.DateTime(timezone=True), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['billing_account_id'], ['billing_accounts.id'], name=op.f('fk_subscriptions_billing_account_id_billing_accounts')),
    sa.ForeignKeyConstraint(['plan_id'], ['plans.id'], name=op.f('fk_subscriptions_plan_id_plans')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_subscriptions')),
    sa.UniqueConstraint('provider_id', name=op.f('uq_subscriptions_provider_id'))
    )
    with op.batch_alter_table('subscriptions', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_subscriptions_billing_account_id'), ['billing_account_id'], unique=False)

    op.create_table('scheduled_changes',
    sa.Column('id', sa.String(length=128), nullable=False),
    sa.Column('subscription_id', sa.String(length=128), nullable=False),
    sa.Column('from_plan_id', sa.String(length=128), nullable=False),
    sa.Column('target_plan_id', sa.String(length=128), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('effective_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('reason', sa.String(length=255), nullable=True),
    sa.Column('proration_behavior', sa.String(length=32), nullable=False),
    sa.Column('command_id', sa.String(length=64), nullable=True),
    sa.Column('claims', sa.Integer(), nullable=False),
    sa.Column('lease_until', sa.DateTime(timezone=True), nullable=True),
    sa.Column('applied_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('apply_lag_seconds', sa.Float(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['from_plan_id'], ['plans.id'], name=op.f('fk_scheduled_changes_from_plan_id_plans')),
    sa.ForeignKeyConstraint(['subscription_id'], ['subscriptions.id'], name=op.f('fk_scheduled_changes_subscription_id_subscriptions')),
    sa.ForeignKeyConstraint(['target_plan_id'], ['plans.id'], name=op.f('fk_scheduled_changes_target_plan_id_plans')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_scheduled_changes'))
    )
    with op.batch_alter_table('scheduled_changes', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_scheduled_changes_subscription_id'), ['subscription_id'], unique=False)
        batch_op.create_index('ix_scheduled_changes_state_effective_at', ['state', 'effective_at'], unique=False)
        batch_op.create_index('uq_scheduled_changes_pending_subscription_id', ['subscription_id'], unique=True, sqlite_where=PENDING, postgresql_where=PENDING)


def downgrade() -> None:
    with op.batch_alter_table('scheduled_changes', schema=None) as batch_op:
        batch_op.drop_index('uq_scheduled_changes_pending_subscription_id', sqlite_where=PENDING, postgresql_where=PENDING)
        batch_op.drop_index('ix_scheduled_changes_state_effective_at')
        batch_op.drop_index(batch_op.f('ix_scheduled_changes_subscription_id'))
    op.drop_table('scheduled_changes')
    with op.batch_alter_table('subscriptions', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_subscriptions_billing_account_id'))
    op.drop_table('subscriptions')
    op.drop_table('plans')
