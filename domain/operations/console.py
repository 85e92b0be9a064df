"""The operator console's read side: what ``accounts show``, ``subscriptions show`` and the
lists answer, and the port that reads it (``adapters/db/timelines.py``, ``adapters/db/listing.py``).

Views are frozen models of ids, states, timestamps and error messages, the same on the
command line (``--json``) and over HTTP (``/v1beta1/operations/…``). Lists are pages in a
stable order with an opaque cursor: ``next_cursor`` is given back as ``after`` for the next
page, and is ``None`` on the last one.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Annotated, Any, Protocol

from pydantic import Field, PlainSerializer, WithJsonSchema

from domain.messages import Message
from domain.operations.audit import AuditEntry

Timestamp = Annotated[
    datetime,
    PlainSerializer(lambda value: value.isoformat(), return_type=str, when_used="json"),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]
"""A timestamp, written as the rest of the API writes them (``datetime.isoformat``)."""

MAX_PAGE_SIZE = 500
DEFAULT_PAGE_SIZE = 50


class ProviderCallView(Message):
    id: int
    at: Timestamp
    operation: str
    subject: str | None
    command_id: str | None
    idempotency_key: str | None
    attempt: int = Field(description="The attempt of its idempotency key (1 the first).")
    outcome: str = Field(description="succeeded, retryable, refused or crashed.")
    error: str | None
    duration_ms: int


class EventView(Message):
    id: str
    type: str
    occurred_at: Timestamp
    command_id: str | None
    subject: str
    published_at: Timestamp | None
    data: dict[str, Any]


class CommandView(Message):
    """A command of the log as an operator reads it."""

    id: str
    type: str
    status: str
    source: str
    attempts: int = Field(description="Deliveries run, replays included.")
    created_at: Timestamp
    updated_at: Timestamp
    finished_at: Timestamp | None
    last_error: str | None = Field(description="The last error's message, if any.")
    next_retry_at: Timestamp | None = Field(
        description="When a retrying command runs again (its last backoff)."
    )
    retries: int = Field(description="Transient failures recorded (the backoff history).")


class AccountStory(Message):
    """A billing account, its organization and Stripe customer, and everything that
    happened to it: the commands that named it or its organization, the provider calls
    made for them or about it, and the events it emitted."""

    billing_account: dict[str, Any]
    organization: dict[str, Any] | None
    registered: bool = Field(description="Whether it has a customer at the provider.")
    provider_customer_id: str | None
    registration_key: str | None = Field(
        description="The idempotency key of a registration under way."
    )
    registration_started_at: Timestamp | None
    commands: list[CommandView]
    provider_calls: list[ProviderCallView]
    events: list[EventView]
    subscriptions: list[SubscriptionStory] = Field(
        default_factory=list,
        description="Its subscriptions' stories (phases, plan changes, invoices, commands, "
        "Stripe calls and events), newest first.",
    )
    audit: list[AuditEntry] = Field(
        default_factory=list,
        description="What operators did to it or its commands, subscriptions and changes (the "
        "audit trail), oldest first.",
    )


class PhaseView(Message):
    effective_at: Timestamp
    plan_id: str
    source: str = Field(description="applied (a past change), current, or the pending state.")


class InvoiceLineView(Message):
    """One line of an invoice: amounts in the currency's minor units, credits negative."""

    description: str
    amount: int
    proration: bool
    period_start: Timestamp
    period_end: Timestamp
    price_id: str | None
    discount: int = Field(
        default=0, description="What discounts took off `amount` (the line costs the rest)."
    )


class InvoiceView(Message):
    id: str
    status: str
    number: str | None
    currency: str
    amount_due: int
    amount_paid: int
    billing_reason: str | None
    created: Timestamp
    total: int = 0
    total_discount: int = Field(
        default=0,
        description="What discounts at Stripe (a coupon) took off the subtotal; `total` is "
        "after them.",
    )
    credited: int = Field(
        default=0,
        description="What credit notes issued on it took back (before or after it was "
        "paid): money given back, its lines unchanged.",
    )
    starting_balance: int = Field(
        default=0,
        description="The customer's balance the invoice began with and took into its amount "
        "due (positive: owed by the customer; negative: a credit).",
    )
    ending_balance: int = Field(
        default=0,
        description="The balance it left: a credit it did not use, or an amount due below "
        "Stripe's minimum charge, carried to the next invoice instead of charged.",
    )
    period_start: Timestamp | None
    period_end: Timestamp | None
    lines: list[InvoiceLineView] = Field(
        default_factory=list, description="Its lines (the first page, as Stripe embeds them)."
    )


class SubscriptionStory(Message):
    """A subscription: its phases (past, current, to come), its plan changes with their
    apply lag, its invoices at the provider, the commands that named it and its events."""

    subscription: dict[str, Any] = Field(
        description="The subscription as the API shows it, with its plan and current phase."
    )
    phases: list[PhaseView]
    changes: list[dict[str, Any]] = Field(
        description="Its plan changes, newest first, each with its apply lag once applied."
    )
    invoices: list[InvoiceView] | None = Field(
        description="From the provider; null when it could not be read (invoices_error)."
    )
    invoices_error: str | None = None
    next_invoice: InvoiceView | None = Field(
        default=None,
        description="The next invoice as the provider would make it now (a live "
        "subscription's renewal, with what is pending); null when it was not read "
        "(next_invoice_error) or the subscription is over.",
    )
    next_invoice_error: str | None = None
    commands: list[CommandView]
    provider_calls: list[ProviderCallView]
    events: list[EventView]


class OrganizationItem(Message):
    id: str
    name: str
    title: str
    state: str
    created_at: Timestamp


class UserItem(Message):
    id: str
    email: str
    name: str
    state: str
    created_at: Timestamp


class BillingAccountItem(Message):
    id: str
    org_id: str
    state: str
    registered: bool
    provider_id: str | None
    currency: str
    created_at: Timestamp
    customer_deleted_at: Timestamp | None


class SubscriptionItem(Message):
    id: str
    billing_account_id: str
    plan_id: str
    state: str
    provider_id: str
    current_period_end: Timestamp
    pending_change: str | None = Field(description="The pending change's id, if any.")


class OrganizationPage(Message):
    items: list[OrganizationItem]
    next_cursor: str | None


class UserPage(Message):
    items: list[UserItem]
    next_cursor: str | None


class BillingAccountPage(Message):
    items: list[BillingAccountItem]
    next_cursor: str | None


class SubscriptionPage(Message):
    items: list[SubscriptionItem]
    next_cursor: str | None


class CommandPage(Message):
    items: list[CommandView]
    next_cursor: str | None


IN_FLIGHT_STATUSES = ("queued", "running", "retrying", "waiting")


class RetryView(Message):
    """One transient failure of a command and the backoff that followed it."""

    attempt: int | None
    at: Timestamp | None
    reason: str | None
    delay_seconds: float | None


class CommandStory(Message):
    """A command and everything it did: its record (payload, result and error whole, as the
    command log keeps them: a page masks them by the redaction rules), its transient
    failures, the Stripe calls made for it, the events it emitted and what operators did
    about it."""

    command: CommandView
    payload: dict[str, Any]
    result: dict[str, Any] | None
    error: dict[str, Any] | None
    client_id: str | None
    idempotency_key: str | None
    published_at: Timestamp | None
    retry_history: list[RetryView]
    provider_calls: list[ProviderCallView]
    events: list[EventView]
    audit: list[AuditEntry] = Field(
        default_factory=list, description="The operators' actions on it, newest first."
    )


SEARCH_KINDS = ("billing_account", "organization", "command", "subscription")


class SearchHit(Message):
    """One thing a console search found: what it is, its id, and how it matched (``id``,
    ``stripe id``, ``handle``, ``name``, ``email``)."""

    kind: str = Field(description="billing_account, organization, command or subscription.")
    id: str
    matched: str
    label: str = Field(description="What to show beside the id (masked where personal).")
    org_id: str | None = None
    state: str | None = None


class ConsoleQueries(Protocol):
    """The console's reads. Each is one short read-only transaction; a bad cursor or filter
    is an ``InvalidArgument`` naming it."""

    def account_story(self, org_or_account: str) -> AccountStory | None:
        """The account named by its id, or the organization's current account (else its
        newest) named by the organization's id; ``None`` if neither exists."""
        ...

    def subscription_story(self, subscription_id: str) -> SubscriptionStory | None:
        """The subscription's story without its invoices (``invoices`` is ``None``)."""
        ...

    def organizations(
        self, *, state: str | None, limit: int, after: str | None
    ) -> OrganizationPage: ...

    def users(self, *, state: str | None, limit: int, after: str | None) -> UserPage: ...

    def billing_accounts(
        self, *, state: str | None, org_id: str | None, limit: int, after: str | None
    ) -> BillingAccountPage: ...

    def subscriptions(
        self,
        *,
        state: str | None,
        billing_account_id: str | None,
        plan_id: str | None,
        limit: int,
        after: str | None,
    ) -> SubscriptionPage: ...

    def commands(
        self,
        *,
        statuses: Sequence[str],
        command_type: str | None,
        limit: int,
        after: str | None,
        updated_since: datetime | None = None,
    ) -> CommandPage:
        """Commands in ``statuses``, oldest first (only those updated at or after
        ``updated_since``, when given: what failed in the last day)."""
        ...

    def recent_commands(
        self, *, status: str, updated_since: datetime, shown: int
    ) -> tuple[int, list[CommandView]]:
        """How many commands in ``status`` were updated at or after ``updated_since``, and
        the ``shown`` most recently updated of them, oldest first: a count over an index,
        then a few rows, however many failed that day (the home page)."""
        ...

    def command_story(self, command_id: str) -> CommandStory | None:
        """The command's record, its Stripe calls and its events; ``None`` if no command has
        that id (or it was pruned)."""
        ...

    def search(self, query: str, *, limit: int) -> list[SearchHit]:
        """What ``query`` names, each read through an index: an account, organization,
        subscription or command by its id, an account or subscription by its Stripe id, an
        organization by its handle, an account by its whole name or its whole email
        address. At most ``limit`` hits; none for an empty query."""
        ...


AccountStory.model_rebuild()


def merged(
    story: AccountStory,
) -> tuple[list[CommandView], list[ProviderCallView], list[EventView]]:
    """The account's commands, Stripe calls and events with its subscriptions', each once, in
    the order they happened (the one timeline of an account)."""
    commands = {command.id: command for command in story.commands}
    calls = {call.id: call for call in story.provider_calls}
    events = {event.id: event for event in story.events}
    for subscription in story.subscriptions:
        commands.update((command.id, command) for command in subscription.commands)
        calls.update((call.id, call) for call in subscription.provider_calls)
        events.update((event.id, event) for event in subscription.events)
    return (
        sorted(commands.values(), key=lambda command: (command.created_at, command.id)),
        sorted(calls.values(), key=lambda call: (call.at, call.id)),
        sorted(events.values(), key=lambda event: (event.occurred_at, event.id)),
    )


def duration(seconds: float | None) -> str:
    """A span as a reader counts it: ``37.2s`` under a minute, else days, hours, minutes and
    whole seconds from the largest unit on (``1d 0h 0m 37s``, ``5m 3s``); ``-`` before a
    negative one (a change made before its boundary)."""
    if seconds is None:
        return ""
    sign, left = ("-" if seconds < 0 else ""), abs(seconds)
    if left < 60:
        return f"{sign}{left:.1f}s"
    whole = round(left)
    amounts = (whole // 86_400, whole % 86_400 // 3600, whole % 3600 // 60, whole % 60)
    shown = [f"{amount}{unit}" for unit, amount in zip("dhms", amounts, strict=True)]
    while shown[0].startswith("0"):
        shown.pop(0)
    return sign + " ".join(shown)
