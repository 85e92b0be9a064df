"""the events outbox, webhook endpoints and their deliveries

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "events",
        sa.Column(
            "sequence",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("type", sa.String(length=64), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("subject_key", sa.String(length=200), nullable=False),
        sa.Column("command_id", sa.String(length=64), nullable=True),
        sa.Column("occurred_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("document", JSON, nullable=False),
        sa.Column("published_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("sequence", name=op.f("pk_events")),
        sa.UniqueConstraint("id", name=op.f("uq_events_id")),
    )
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_events_subject_key"), ["subject_key"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_events_published_at"), ["published_at"], unique=False
        )
        batch_op.create_index(
            "ix_events_unpublished",
            ["sequence"],
            unique=False,
            sqlite_where=sa.text("published_at IS NULL"),
            postgresql_where=sa.text("published_at IS NULL"),
        )

    op.create_table(
        "webhook_endpoints",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("url", sa.String(length=2048), nullable=False),
        sa.Column("event_types", JSON, nullable=False),
        sa.Column("secret", sa.String(length=128), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("description", sa.String(length=255), nullable=False),
        sa.Column("disabled_reason", sa.Text(), nullable=True),
        sa.Column("disabled_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("previous_secret", sa.String(length=128), nullable=True),
        sa.Column("previous_secret_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_endpoints")),
    )
    op.create_table(
        "webhook_deliveries",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("event_id", sa.String(length=64), nullable=False),
        sa.Column("event_type", sa.String(length=64), nullable=False),
        sa.Column("event_sequence", sa.BigInteger(), nullable=False),
        sa.Column("subject_key", sa.String(length=200), nullable=False),
        sa.Column("endpoint_id", sa.String(length=64), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("claims", sa.Integer(), nullable=False),
        sa.Column("first_attempt_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_attempt_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_status", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("delivered_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("history", JSON, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["endpoint_id"],
            ["webhook_endpoints.id"],
            name=op.f("fk_webhook_deliveries_endpoint_id_webhook_endpoints"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_deliveries")),
        sa.UniqueConstraint("event_id", "endpoint_id", name="uq_webhook_deliveries_event_endpoint"),
    )
    with op.batch_alter_table("webhook_deliveries", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_webhook_deliveries_event_id"), ["event_id"], unique=False
        )
        batch_op.create_index(
            "ix_webhook_deliveries_state_updated_at", ["state", "updated_at"], unique=False
        )
        batch_op.create_index(
            "ix_webhook_deliveries_state_next_attempt_at",
            ["state", "next_attempt_at"],
            unique=False,
        )
        batch_op.create_index(
            "ix_webhook_deliveries_unfinished_subject",
            ["endpoint_id", "subject_key", "event_sequence"],
            unique=False,
            sqlite_where=sa.text("state IN ('pending', 'delivering')"),
            postgresql_where=sa.text("state IN ('pending', 'delivering')"),
        )


def downgrade() -> None:
    with op.batch_alter_table("webhook_deliveries", schema=None) as batch_op:
        batch_op.drop_index(
            "ix_webhook_deliveries_unfinished_subject",
            sqlite_where=sa.text("state IN ('pending', 'delivering')"),
            postgresql_where=sa.text("state IN ('pending', 'delivering')"),
        )
        batch_op.drop_index("ix_webhook_deliveries_state_next_attempt_at")
        batch_op.drop_index(batch_op.f("ix_webhook_deliveries_event_id"))

    op.drop_table("webhook_deliveries")
    op.drop_table("webhook_endpoints")
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.drop_index(
            "ix_events_unpublished",
            sqlite_where=sa.text("published_at IS NULL"),
            postgresql_where=sa.text("published_at IS NULL"),
        )
        batch_op.drop_index(batch_op.f("ix_events_subject_key"))

    op.drop_table("events")
