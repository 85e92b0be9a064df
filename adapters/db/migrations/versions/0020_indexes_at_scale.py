"""indexes for a database of production's size (issue 46): of the ids a command's payload
names (an account's or a subscription's story finds its commands through them, not by reading
the whole command log), and of each plan's subscriptions by billed price (the off-plan gauge
reads the few off their plan, not every subscription).

Revision ID: 0020
Revises: 0019
"""

from __future__ import annotations

from alembic import op

from adapters.db import payload_fields

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

FIELDS = ("org_id", "billing_account_id", "subscription_id", "change_id")
"""The fields indexed here, frozen: a field indexed later gets a migration of its own."""


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    for name in FIELDS:
        expression = payload_fields.sql(dialect, "payload", name)
        # CONCURRENTLY would not block writers on a large PostgreSQL log, but cannot run in
        # Alembic's transaction; deploy.md says how to build them ahead on a big database.
        op.execute(
            f"CREATE INDEX IF NOT EXISTS ix_commands_payload_{name} ON commands ({expression}) "
            f"WHERE {expression} IS NOT NULL"
        )


    op.create_index(
        "ix_subscriptions_plan_id_billed_price_id",
        "subscriptions",
        ["plan_id", "billed_price_id"],
        if_not_exists=True,
    )
    if dialect == "postgresql":
        # A plan and the price billed go together: without statistics of the pair, the
        # planner takes "off its plan's price" for a fifth of all subscriptions and reads
        # them in parallel, 10 times slower than the few it finds (issue 46's figures).
        op.execute(
            "CREATE STATISTICS IF NOT EXISTS st_subscriptions_plan_id_billed_price_id "
            "(mcv, dependencies) ON plan_id, billed_price_id FROM subscriptions"
        )
        # Filled now, not at autovacuum's next analyze (a sample: a second on millions).
        op.execute("ANALYZE subscriptions")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP STATISTICS IF EXISTS st_subscriptions_plan_id_billed_price_id")
    op.drop_index("ix_subscriptions_plan_id_billed_price_id", table_name="subscriptions")
    for name in FIELDS:
        op.execute(f"DROP INDEX IF EXISTS ix_commands_payload_{name}")
