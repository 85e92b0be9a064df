"""Tables. Changing one means a new Alembic revision in ``adapters/db/migrations/versions``."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.sql.elements import TextClause

from adapters.db import payload_fields
from adapters.db.payload_fields import PayloadField
from adapters.db.types import JSONDocument, UTCDateTime

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class OrganizationRow(Base):
    __tablename__ = "organizations"

    id: Mapped[str] = mapped_column(String(128), primary_key=True)
    name: Mapped[str] = mapped_column(String(255), unique=True)
    title: Mapped[str] = mapped_column(String(255), default="")
    metadata_: Mapped[dict[str, Any]] = mapped_column("metadata", JSONDocument, default=dict)
    state: Mapped[str] = mapped_column(String(16))
    avatar: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)


class UserRow(Base):
    __tablename__ = "users"

    id: Mapped[str] = mapped_column(String(128), primary_key=True)
    email: Mapped[str] = mapped_column(String(320), unique=True)
    name: Mapped[str] = mapped_column(String(255), default="")
    state: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)


class ApiClientRow(Base):
    __tablename__ = "api_clients"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(255))
    secret_hash: Mapped[str] = mapped_column(String(255))
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    scopes: Mapped[list[str]] = mapped_column(JSONDocument, default=list)
    org_ids: Mapped[list[str] | None] = mapped_column(JSONDocument, nullable=True)
    """The organizations the client may act in; ``NULL`` for every organization."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class CommandRow(Base):
    """The command log: every command the system accepted, whoever sent it, and its outcome."""

    __tablename__ = "commands"
    __table_args__ = (
        UniqueConstraint("client_id", "idempotency_key", name="uq_commands_client_idempotency"),
        Index("ix_commands_status_updated_at", "status", "updated_at"),
        # Pruning finds the oldest finished commands of a status (adapters/db/command_log.py).
        Index("ix_commands_status_finished_at", "status", "finished_at"),
    )

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    type: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16))
    source: Mapped[str] = mapped_column(String(16))
    payload: Mapped[dict[str, Any]] = mapped_column(JSONDocument)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    result: Mapped[dict[str, Any] | None] = mapped_column(JSONDocument, nullable=True)
    error: Mapped[dict[str, Any] | None] = mapped_column(JSONDocument, nullable=True)
    retries: Mapped[list[dict[str, Any]] | None] = mapped_column(JSONDocument, nullable=True)
    client_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    idempotency_key: Mapped[str | None] = mapped_column(String(255), nullable=True)
    request_fingerprint: Mapped[str | None] = mapped_column(String(64), nullable=True)
    fingerprint: Mapped[str | None] = mapped_column(String(64), nullable=True)
    """Of the command's type and payload (``domain.messages.command_fingerprint``)."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
    published_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    running_since_wall_clock: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    """When its latest delivery began running it, on the machine's clock, which no business
    clock move (``clock advance``, the tests' shifted clock) touches: how long a run has
    lasted is measured on it (``CommandJournal.stalled``)."""


def _payload_field_index(name: str) -> Index:
    """A story's look-up of the commands whose payload names ``name`` (a partial index: most
    commands name only some of the fields)."""

    def present(dialect: str) -> TextClause:
        return text(f"{payload_fields.sql(dialect, 'payload', name)} IS NOT NULL")

    return Index(
        f"ix_commands_payload_{name}",
        PayloadField(CommandRow.__table__.c.payload, name),
        postgresql_where=present("postgresql"),
        sqlite_where=present("sqlite"),
    )


COMMAND_PAYLOAD_INDEXES = [_payload_field_index(name) for name in payload_fields.INDEXED_FIELDS]


class CommandStatusCountRow(Base):
    """Commands in each counted status (failed, rejected), kept by triggers on ``commands``
    as they change (``adapters/db/status_counts.py``)."""

    __tablename__ = "command_status_counts"

    status: Mapped[str] = mapped_column(String(16), primary_key=True)
    count: Mapped[int] = mapped_column(BigInteger)


LIVE_BILLING_ACCOUNT_STATES = "state IN ('pending', 'active')"


class BillingAccountRow(Base):
    __tablename__ = "billing_accounts"
    __table_args__ = (
        # At most one account per organization that is not disabled, even under races.
        Index(
            "uq_billing_accounts_live_org_id",
            "org_id",
            unique=True,
            sqlite_where=text(LIVE_BILLING_ACCOUNT_STATES),
            postgresql_where=text(LIVE_BILLING_ACCOUNT_STATES),
        ),
        # Beat's re-drive and gauge of accounts stuck pending: the oldest pending ones.
        Index("ix_billing_accounts_state_created_at", "state", "created_at"),
        # The console's search by a whole name or a whole email address.
        Index("ix_billing_accounts_name", "name"),
        Index("ix_billing_accounts_email", "email"),
    )

    id: Mapped[str] = mapped_column(String(128), primary_key=True)
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id"), index=True)
    name: Mapped[str] = mapped_column(String(256))
    email: Mapped[str] = mapped_column(String(320))
    phone: Mapped[str] = mapped_column(String(32), default="")
    address: Mapped[dict[str, Any]] = mapped_column(JSONDocument, default=dict)
    currency: Mapped[str] = mapped_column(String(3))
    tax_data: Mapped[list[dict[str, str]]] = mapped_column(JSONDocument, default=list)
    metadata_: Mapped[dict[str, Any]] = mapped_column("metadata", JSONDocument, default=dict)
    state: Mapped[str] = mapped_column(String(16))
    provider: Mapped[str | None] = mapped_column(String(32), nullable=True)
    provider_id: Mapped[str | None] = mapped_column(String(255), nullable=True, unique=True)
    registration_key: Mapped[str | None] = mapped_column(String(255), nullable=True)
    registration_started_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
    customer_deleted_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    synced_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class PlanRow(Base):
    __tablename__ = "plans"

    id: Mapped[str] = mapped_column(String(128), primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    title: Mapped[str] = mapped_column(String(255))
    interval: Mapped[str] = mapped_column(String(8))
    amount: Mapped[int] = mapped_column(Integer)
    currency: Mapped[str] = mapped_column(String(3))
    active: Mapped[bool] = mapped_column(Boolean, default=True)
    provider: Mapped[str | None] = mapped_column(String(32), nullable=True)
    provider_product_id: Mapped[str | None] = mapped_column(String(255), nullable=True)
    provider_price_id: Mapped[str | None] = mapped_column(String(255), nullable=True, unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)


DISCOUNTED = "billed_discount IS NOT NULL"


class SubscriptionRow(Base):
    __tablename__ = "subscriptions"
    __table_args__ = (
        # The off-plan gauge: a plan's subscriptions billed at a price other than its own.
        Index("ix_subscriptions_plan_id_billed_price_id", "plan_id", "billed_price_id"),
        # The discounted gauge: the few subscriptions with a discount at Stripe, by state.
        Index(
            "ix_subscriptions_discounted_state",
            "state",
            sqlite_where=text(DISCOUNTED),
            postgresql_where=text(DISCOUNTED),
        ),
    )

    id: Mapped[str] = mapped_column(String(128), primary_key=True)
    billing_account_id: Mapped[str] = mapped_column(ForeignKey("billing_accounts.id"), index=True)
    plan_id: Mapped[str] = mapped_column(ForeignKey("plans.id"))
    state: Mapped[str] = mapped_column(String(16))
    provider: Mapped[str] = mapped_column(String(32))
    provider_id: Mapped[str] = mapped_column(String(255), unique=True)
    current_period_start: Mapped[datetime] = mapped_column(UTCDateTime)
    current_period_end: Mapped[datetime] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
    provider_item_id: Mapped[str | None] = mapped_column(String(255), nullable=True)
    cancel_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    synced_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True, index=True)
    billed_price_id: Mapped[str | None] = mapped_column(String(255), nullable=True)
    billed_discount: Mapped[str | None] = mapped_column(String(500), nullable=True)
    provider_schedule_id: Mapped[str | None] = mapped_column(String(255), nullable=True)


PENDING_CHANGE_STATES = "state IN ('scheduled', 'applying', 'staged', 'awaiting_payment')"


class ScheduledChangeRow(Base):
    """Plan changes of subscriptions, pending and past (see
    ``domain/subscriptions/scheduled_changes.py``)."""

    __tablename__ = "scheduled_changes"
    __table_args__ = (
        # At most one pending change per subscription, even under races.
        Index(
            "uq_scheduled_changes_pending_subscription_id",
            "subscription_id",
            unique=True,
            sqlite_where=text(PENDING_CHANGE_STATES),
            postgresql_where=text(PENDING_CHANGE_STATES),
        ),
        # What the sweep looks for: due scheduled changes and expired leases.
        Index("ix_scheduled_changes_state_effective_at", "state", "effective_at"),
        # Beat's gauges: the earliest pending change of a kind (the pending ones only: the
        # year of finished ones is not in it).
        Index(
            "ix_scheduled_changes_pending_kind",
            "kind",
            "effective_at",
            "state",
            sqlite_where=text(PENDING_CHANGE_STATES),
            postgresql_where=text(PENDING_CHANGE_STATES),
        ),
    )

    id: Mapped[str] = mapped_column(String(128), primary_key=True)
    subscription_id: Mapped[str] = mapped_column(ForeignKey("subscriptions.id"), index=True)
    from_plan_id: Mapped[str] = mapped_column(ForeignKey("plans.id"))
    target_plan_id: Mapped[str] = mapped_column(ForeignKey("plans.id"))
    kind: Mapped[str] = mapped_column(String(16))
    effective_at: Mapped[datetime] = mapped_column(UTCDateTime)
    state: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str | None] = mapped_column(String(255), nullable=True)
    proration_behavior: Mapped[str] = mapped_column(String(32))
    command_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    claims: Mapped[int] = mapped_column(Integer, default=0)
    lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    applied_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    apply_lag_seconds: Mapped[float | None] = mapped_column(Float, nullable=True)
    first_sent_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    staged_period_end: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    payment_url: Mapped[str | None] = mapped_column(String(2048), nullable=True)
    payment_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)


class RenewalCheckRow(Base):
    """The check of each renewal a plan change at the period's end took effect at (see
    ``domain/subscriptions/renewal_checks.py``)."""

    __tablename__ = "renewal_checks"
    __table_args__ = (
        # What the reconciliation sweep looks for: checks due, the earliest first.
        Index("ix_renewal_checks_state_due_at", "state", "due_at"),
    )

    id: Mapped[str] = mapped_column(ForeignKey("scheduled_changes.id"), primary_key=True)
    subscription_id: Mapped[str] = mapped_column(String(128))
    plan_id: Mapped[str] = mapped_column(String(128))
    period_start: Mapped[datetime] = mapped_column(UTCDateTime)
    due_at: Mapped[datetime] = mapped_column(UTCDateTime)
    state: Mapped[str] = mapped_column(String(16))
    checks: Mapped[int] = mapped_column(Integer, default=0)
    finding: Mapped[str | None] = mapped_column(Text, nullable=True)
    checked_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)


class ChangePreviewRow(Base):
    """Previews answered lately: the proration times a change may name
    (``domain/subscriptions/change_previews.py``); a subscription's expired ones go with its next
    preview."""

    __tablename__ = "change_previews"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    subscription_id: Mapped[str] = mapped_column(String(128), index=True)
    from_plan_id: Mapped[str] = mapped_column(String(128))
    plan_id: Mapped[str] = mapped_column(String(128))
    proration_date: Mapped[datetime] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)


UNPUBLISHED_EVENTS = "published_at IS NULL"


class EventRow(Base):
    """The outbox: every event, written in the transaction of the change that caused it."""

    __tablename__ = "events"
    __table_args__ = (
        # What the relay looks for: the few events not yet published, in order.
        Index(
            "ix_events_unpublished",
            "sequence",
            sqlite_where=text(UNPUBLISHED_EVENTS),
            postgresql_where=text(UNPUBLISHED_EVENTS),
        ),
    )

    sequence: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    )
    id: Mapped[str] = mapped_column(String(64), unique=True)
    type: Mapped[str] = mapped_column(String(64))
    version: Mapped[int] = mapped_column(Integer)
    subject_key: Mapped[str] = mapped_column(String(200), index=True)
    command_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    occurred_at: Mapped[datetime] = mapped_column(UTCDateTime)
    document: Mapped[dict[str, Any]] = mapped_column(JSONDocument)
    published_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True, index=True)


class ProviderWalkRow(Base):
    """Where beat's reconciliation sweep stands in each of Stripe's lists (issue 46): one row
    per list walked, written after each page."""

    __tablename__ = "provider_walks"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    after: Mapped[str | None] = mapped_column(String(255), nullable=True)
    pass_started_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    completed_pass_started_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    updated_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class StripeEndpointRow(Base):
    """Our webhook endpoints at Stripe and their signing secrets."""

    __tablename__ = "stripe_endpoints"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    url: Mapped[str] = mapped_column(String(2048))
    secret: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)


class WebhookEndpointRow(Base):
    __tablename__ = "webhook_endpoints"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    url: Mapped[str] = mapped_column(String(2048))
    event_types: Mapped[list[str]] = mapped_column(JSONDocument, default=list)
    secret: Mapped[str] = mapped_column(String(128))
    state: Mapped[str] = mapped_column(String(16))
    description: Mapped[str] = mapped_column(String(255), default="")
    disabled_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    disabled_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    previous_secret: Mapped[str | None] = mapped_column(String(128), nullable=True)
    previous_secret_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)


UNFINISHED_DELIVERIES = "state IN ('pending', 'delivering')"


class WebhookDeliveryRow(Base):
    __tablename__ = "webhook_deliveries"
    __table_args__ = (
        UniqueConstraint("event_id", "endpoint_id", name="uq_webhook_deliveries_event_endpoint"),
        # What the sweep looks for: due deliveries and expired leases.
        Index("ix_webhook_deliveries_state_next_attempt_at", "state", "next_attempt_at"),
        # What retention looks for: the oldest finished deliveries.
        Index("ix_webhook_deliveries_state_updated_at", "state", "updated_at"),
        # The order of a subject's deliveries to an endpoint.
        Index(
            "ix_webhook_deliveries_unfinished_subject",
            "endpoint_id",
            "subject_key",
            "event_sequence",
            sqlite_where=text(UNFINISHED_DELIVERIES),
            postgresql_where=text(UNFINISHED_DELIVERIES),
        ),
    )

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    event_id: Mapped[str] = mapped_column(String(64), index=True)
    event_type: Mapped[str] = mapped_column(String(64))
    event_sequence: Mapped[int] = mapped_column(BigInteger)
    subject_key: Mapped[str] = mapped_column(String(200))
    endpoint_id: Mapped[str] = mapped_column(ForeignKey("webhook_endpoints.id"))
    state: Mapped[str] = mapped_column(String(16))
    next_attempt_at: Mapped[datetime] = mapped_column(UTCDateTime)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    claims: Mapped[int] = mapped_column(Integer, default=0)
    first_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    last_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    last_status: Mapped[int | None] = mapped_column(Integer, nullable=True)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    delivered_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    history: Mapped[list[dict[str, Any]]] = mapped_column(JSONDocument, default=list)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)


class ProviderCallRow(Base):
    """Every call made to the billing provider for a command (``domain/provider/calls.py``)."""

    __tablename__ = "provider_calls"

    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    )
    command_id: Mapped[str | None] = mapped_column(String(64), nullable=True, index=True)
    operation: Mapped[str] = mapped_column(String(64))
    subject: Mapped[str | None] = mapped_column(String(200), nullable=True, index=True)
    idempotency_key: Mapped[str | None] = mapped_column(String(255), nullable=True, index=True)
    attempt: Mapped[int] = mapped_column(Integer)
    outcome: Mapped[str] = mapped_column(String(16))
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)
    duration_ms: Mapped[int] = mapped_column(Integer)


class AuditEntryRow(Base):
    """The operators' audit trail (``domain.operations.audit``): one row per action taken,
    written in its transaction, never changed."""

    __tablename__ = "audit_entries"

    id: Mapped[str] = mapped_column(String(128), primary_key=True)
    action: Mapped[str] = mapped_column(String(64), index=True)
    operator: Mapped[str] = mapped_column(String(128), index=True)
    surface: Mapped[str] = mapped_column(String(16))
    at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)
    reason: Mapped[str] = mapped_column(Text)
    targets: Mapped[list[str]] = mapped_column(JSONDocument)
    target_ids: Mapped[str] = mapped_column(Text)
    """The targets' ids and ``type:id`` forms, space-separated between spaces: what a filter
    on one target matches (``LIKE '% id %'``) alike on every database."""
    billing_account_id: Mapped[str | None] = mapped_column(String(128), nullable=True, index=True)
    changes: Mapped[list[str]] = mapped_column(JSONDocument)
