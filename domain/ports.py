"""Ports: what the handlers need from the outside world, as Protocols.

Adapters in ``worker/`` implement them (SQLAlchemy, Stripe); the handlers in ``tasks/`` only
see these.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, Protocol, Self

from domain.billing import BillingAccount, ProviderCustomer
from domain.change_previews import ChangePreview
from domain.console import InvoiceView
from domain.drift import RemoteCustomer, RemoteSubscription
from domain.event_base import Event
from domain.event_ports import (
    EventOutbox,
    EventStream,
    RelayLock,
    StripeEndpointRepository,
    WebhookDeliveryRepository,
    WebhookEndpointRepository,
    WebhookSender,
)
from domain.messages import CommandStatus
from domain.organizations import Organization
from domain.plans import Plan, ProviderPlan, ProviderPrice
from domain.provider_sync import ProviderCustomerState, RegisteredEndpoint
from domain.rate_budget import RateBudget
from domain.retention import CommandRetention
from domain.scheduled_changes import PaymentBehavior, ProrationBehavior, ScheduledChange
from domain.subscriptions import ProviderSubscription, Subscription, SubscriptionTerms
from domain.users import User
from domain.webhooks import DeliveryPolicy


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware UTC."""
        ...


class UserRepository(Protocol):
    def get(self, user_id: str, *, for_update: bool = False) -> User | None: ...

    def by_email(self, email: str) -> User | None: ...

    def add(self, user: User) -> None: ...

    def save(self, user: User) -> None: ...


class OrganizationRepository(Protocol):
    def get(self, org_id: str) -> Organization | None: ...

    def by_name(self, name: str) -> Organization | None: ...

    def add(self, organization: Organization) -> None: ...


class BillingAccountRepository(Protocol):
    def get(self, account_id: str, *, for_update: bool = False) -> BillingAccount | None: ...

    def current_for_organization(self, org_id: str) -> BillingAccount | None:
        """The organization's account that is not disabled, if any."""
        ...

    def add(self, account: BillingAccount) -> None: ...

    def save(self, account: BillingAccount) -> None: ...

    def remove(self, account_id: str) -> None: ...

    def by_provider_id(
        self, provider_id: str, *, for_update: bool = False
    ) -> BillingAccount | None: ...

    def least_recently_synced(self, limit: int) -> list[str]:
        """Ids of up to ``limit`` registered accounts whose customer is not known deleted,
        read from the provider longest ago (never read first)."""
        ...

    def list_all(self) -> list[BillingAccount]:
        """Every account, whatever its state (the drift report), by id."""
        ...

    def pending_created_before(self, before: datetime, limit: int) -> list[BillingAccount]:
        """Up to ``limit`` accounts still ``pending`` that were opened at or before
        ``before``, oldest first (beat's re-drive of stuck registrations)."""
        ...


class PlanRepository(Protocol):
    def get(self, plan_id: str) -> Plan | None: ...

    def by_name(self, name: str) -> Plan | None: ...

    def find(self, id_or_name: str) -> Plan | None:
        """The plan with this id, else the plan with this name."""
        ...

    def list(self) -> list[Plan]: ...

    def by_provider_price(self, price_id: str) -> Plan | None: ...

    def add(self, plan: Plan) -> None: ...

    def save(self, plan: Plan) -> None: ...


class SubscriptionRepository(Protocol):
    def get(self, subscription_id: str, *, for_update: bool = False) -> Subscription | None: ...

    def by_provider_id(
        self, provider_id: str, *, for_update: bool = False
    ) -> Subscription | None: ...

    def of_account(self, billing_account_id: str) -> list[Subscription]: ...

    def least_recently_synced(self, limit: int) -> list[str]:
        """Ids of up to ``limit`` subscriptions that are not over, read from the provider
        longest ago (never read first)."""
        ...

    def add(self, subscription: Subscription) -> None: ...

    def save(self, subscription: Subscription) -> None: ...

    def list_all(self) -> list[Subscription]:
        """Every subscription, whatever its state (the drift report), by id."""
        ...


@dataclass(frozen=True)
class Claim:
    """A change a sweep took to apply: its id and the claim's number (a fencing token)."""

    change_id: str
    number: int


class ScheduledChangeRepository(Protocol):
    def get(self, change_id: str, *, for_update: bool = False) -> ScheduledChange | None: ...

    def pending_for(
        self, subscription_id: str, *, for_update: bool = False
    ) -> ScheduledChange | None:
        """The subscription's ``scheduled`` or ``applying`` change (there is at most one)."""
        ...

    def for_subscription(self, subscription_id: str) -> list[ScheduledChange]:
        """Every change of the subscription, newest first."""
        ...

    def add(self, change: ScheduledChange) -> None: ...

    def save(self, change: ScheduledChange) -> None: ...

    def claim_due(
        self, now: datetime, lease_until: datetime, limit: int, *, lead: timedelta
    ) -> list[Claim]:
        """Atomically take up to ``limit`` changes that are ``scheduled`` and due (a change
        at the period's end ``lead`` before its boundary), or ``applying`` with an expired
        lease: each becomes ``applying`` until ``lease_until`` with its claim count raised.
        Two sweeps never take the same change."""
        ...

    def staged_due(self, now: datetime, limit: int) -> list[str]:
        """The ids of up to ``limit`` ``staged`` changes whose boundary passed, oldest
        first."""
        ...

    def release(self, claim: Claim, now: datetime) -> None:
        """Let the next sweep take the change again (its lease ends now)."""
        ...

    def count_in_flight(self, now: datetime) -> int:
        """Changes being applied under a lease that still runs (claimed, not yet done)."""
        ...

    def all_pending(self) -> list[ScheduledChange]:
        """Every ``scheduled``, ``applying`` or ``staged`` change (the drift report)."""
        ...


class UnitOfWork(Protocol):
    """One database transaction. Leaving the block without ``commit()`` rolls back.

    ``commit()`` raises :class:`domain.errors.UniquenessViolation` when the transaction would
    break a uniqueness rule (a racing transaction got there first).
    """

    @property
    def users(self) -> UserRepository: ...

    @property
    def organizations(self) -> OrganizationRepository: ...

    @property
    def billing_accounts(self) -> BillingAccountRepository: ...

    @property
    def plans(self) -> PlanRepository: ...

    @property
    def subscriptions(self) -> SubscriptionRepository: ...

    @property
    def scheduled_changes(self) -> ScheduledChangeRepository: ...

    @property
    def events(self) -> EventOutbox: ...

    @property
    def webhook_endpoints(self) -> WebhookEndpointRepository: ...

    @property
    def webhook_deliveries(self) -> WebhookDeliveryRepository: ...

    @property
    def stripe_endpoints(self) -> StripeEndpointRepository: ...

    def __enter__(self) -> Self: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...

    def commit(self) -> None: ...

    def rollback(self) -> None: ...


class BillingProvider(Protocol):
    """The external billing provider (Stripe).

    Failures are raised as domain errors: :class:`domain.errors.TransientError` for what is
    worth retrying (connection errors, 429, 5xx, lock timeouts), a
    :class:`domain.errors.CommandError` for what is not (a 4xx: the request itself is wrong).
    """

    @property
    def name(self) -> str: ...

    def create_customer(self, customer: ProviderCustomer, *, idempotency_key: str) -> str:
        """Create the customer; returns the provider's id. One customer per key."""
        ...

    def find_customer(self, billing_account_id: str) -> str | None:
        """The id of a customer created earlier for this billing account, if any."""
        ...

    def get_customer(self, customer_id: str) -> ProviderCustomerState:
        """The customer as the provider holds it (deleted ones too)."""
        ...

    def register_webhook_endpoint(
        self, url: str, event_types: Sequence[str], known_ids: set[str]
    ) -> RegisteredEndpoint:
        """Create our webhook endpoint for ``url`` (at the pinned API version, for
        ``event_types``), or update the one there is among ``known_ids`` (whose secrets we
        keep); an endpoint of that URL whose secret we do not know is replaced."""
        ...

    def create_plan_price(self, plan: ProviderPlan, *, idempotency_key: str) -> ProviderPrice:
        """Create the plan's product and its recurring price (one of each per key)."""
        ...

    def create_subscription(
        self,
        customer_id: str,
        price_id: str,
        terms: SubscriptionTerms,
        *,
        metadata: dict[str, str],
        idempotency_key: str,
    ) -> ProviderSubscription:
        """Subscribe the customer to the price (one subscription per key)."""
        ...

    def get_subscription(self, provider_id: str) -> ProviderSubscription: ...

    def change_subscription_price(
        self,
        provider_id: str,
        item_id: str,
        price_id: str,
        *,
        proration_behavior: ProrationBehavior,
        idempotency_key: str,
        proration_date: datetime | None = None,
        payment_behavior: PaymentBehavior | None = None,
    ) -> ProviderSubscription:
        """Replace the price of the subscription's item (the item and its id stay),
        prorated as of ``proration_date`` (default: when the provider receives it).
        ``payment_behavior`` ``error_if_incomplete`` makes nothing if the invoice the change
        creates cannot be paid: :class:`domain.errors.PaymentFailed` is raised."""
        ...

    def preview_change(
        self,
        provider_id: str,
        item_id: str,
        price_id: str,
        *,
        proration_behavior: ProrationBehavior,
        proration_date: datetime,
    ) -> ChangePreview:
        """What replacing the item's price at ``proration_date`` would invoice (changes
        nothing)."""
        ...

    # What the provider has, read in lists (they see every write at once; search lags).

    def list_customers(self) -> list[RemoteCustomer]:
        """Every customer the provider has (deleted ones are gone), page after page."""
        ...

    def list_subscriptions(self, customer_id: str | None = None) -> list[RemoteSubscription]:
        """Every subscription whatever its status (canceled ones included), of one customer
        if ``customer_id`` is given, page after page."""
        ...

    def find_subscription(
        self, customer_id: str, subscription_id: str
    ) -> ProviderSubscription | None:
        """The customer's subscription an earlier attempt to create our ``subscription_id``
        made (its metadata names it), whatever its status; a live one before one that is
        over, then the oldest (:func:`domain.drift.existing_subscription`)."""
        ...

    def list_invoices(self, provider_subscription_id: str, limit: int) -> list[InvoiceView]:
        """Up to ``limit`` of the subscription's invoices, newest first (one read)."""
        ...


class BillingPolicy(Protocol):
    @property
    def default_currency(self) -> str: ...

    @property
    def provider_idempotency_window(self) -> timedelta:
        """How long the provider remembers an idempotency key (Stripe: 24 hours), less a
        safety margin; a registration older than this searches before creating."""
        ...

    @property
    def proration_behavior(self) -> ProrationBehavior:
        """How an immediate plan change is prorated (changes at a period end never are)."""
        ...

    @property
    def period_end_lead(self) -> timedelta:
        """How long before its boundary a change at the period's end is made at the provider
        (so that the renewal bills the new price); longer than a period-end burst takes."""
        ...

    @property
    def change_lease(self) -> timedelta:
        """How long a claimed plan change is left to its worker before a sweep takes it
        again (a worker killed mid-change)."""
        ...


class HandlerContext(Protocol):
    """What a command handler is given to work with."""

    @property
    def clock(self) -> Clock: ...

    @property
    def billing(self) -> BillingPolicy: ...

    def unit_of_work(self) -> UnitOfWork: ...

    def billing_provider(self) -> BillingProvider:
        """The provider client (built on first use); a ``CommandError`` if none is set up."""
        ...


class CommandOutcome(Protocol):
    """A finished command's recorded outcome."""

    @property
    def status(self) -> CommandStatus: ...

    @property
    def result(self) -> dict[str, Any] | None: ...

    @property
    def error(self) -> dict[str, Any] | None: ...


class PublishableCommand(Protocol):
    """A command in the log, as it is published: its id, task name and payload."""

    @property
    def id(self) -> str: ...

    @property
    def type(self) -> str: ...

    @property
    def payload(self) -> dict[str, Any]: ...


class JournalRecord(PublishableCommand, Protocol):
    """A command in the log, with where it is in its life."""

    @property
    def status(self) -> CommandStatus: ...


class CannotRunInOneTransaction(Exception):
    """A command cannot be run in one transaction (its handler called the provider, or left
    a change it made uncommitted, or a racing delivery changed its entry): nothing of it was
    recorded, and the runner runs it the usual way."""


class CommandJournal(Protocol):
    """The command log as the task runner and the sweeps see it.

    Each method is its own short transaction, so the log is right even when the handler's
    transaction rolled back.
    """

    def begin(
        self, command_id: str, command_type: str, payload: dict[str, Any], *, source: str
    ) -> CommandOutcome | None:
        """Mark the command running (creating its entry if a publisher sent it directly).

        Returns the recorded outcome instead when the command already finished: a
        redelivered message must not do the work twice. Raises
        :class:`domain.errors.CommandInProgress` while another delivery is running it, and
        :class:`domain.errors.CommandIdReused` when the id names another command.
        """
        ...

    def run_in_one_transaction(
        self,
        command_id: str,
        command_type: str,
        payload: dict[str, Any],
        *,
        source: str,
        work: Callable[[UnitOfWork], dict[str, Any]],
    ) -> CommandOutcome | None:
        """Begin the command, run ``work`` and record what it returns as the command's
        result, in one transaction: for a command whose handler changes the database only
        (``Command.IN_ONE_TRANSACTION``). ``work`` is given a unit of work inside that
        transaction; its ``commit()`` is made with the outcome's.

        Returns the outcome: the one just recorded, or the one recorded before (a
        redelivered message; ``work`` does not run). Returns ``None``, recording nothing,
        when the command is not to run so: another delivery runs it, or its id names another
        command (:meth:`begin` says which). Raises what ``work`` raises, recording nothing,
        and :class:`CannotRunInOneTransaction` when ``work`` left a change uncommitted, or
        the entry changed meanwhile: the caller then runs the command the usual way."""
        ...

    def get(self, command_id: str) -> JournalRecord | None:
        """The command's entry, if the log has it."""
        ...

    def succeed(self, command_id: str, result: dict[str, Any]) -> None: ...

    def fail(self, command_id: str, error: dict[str, Any], events: Sequence[Event] = ()) -> None:
        """Record the failure (``failed``: for an operator), and ``events`` in the same
        transaction."""
        ...

    def reject(self, command_id: str, error: dict[str, Any], events: Sequence[Event] = ()) -> None:
        """Record the rejection (``rejected``: the caller's mistake, ``domain.outcomes``), and
        ``events`` in the same transaction."""
        ...

    def retrying(
        self, command_id: str, error: dict[str, Any], retry: dict[str, Any] | None = None
    ) -> None:
        """Mark the command waiting for a retry; ``retry`` is appended to its history."""
        ...

    def waiting(self, command_id: str, seconds: float) -> None:
        """Mark the command re-queued to wait for the provider's rate budget (not a retry)."""
        ...

    def stalled(self, older_than: timedelta, limit: int = 100) -> Sequence[PublishableCommand]:
        """Commands recorded but not started for ``older_than``: their message was lost."""
        ...

    def mark_published(self, command_id: str) -> None: ...

    def prune_finished(self, status: CommandStatus, before: datetime, limit: int) -> int:
        """Delete up to ``limit`` commands that finished in ``status`` before ``before``,
        oldest first, in one short transaction; returns how many went (fewer than ``limit``:
        none is left). Their idempotency keys go with them. A command another transaction
        holds is skipped, never waited for: a later call takes it. Raises ``ValueError``
        for a status that is not finished (those are never pruned)."""
        ...

    def count_finished(self, status: CommandStatus, before: datetime) -> int:
        """How many commands finished in ``status`` before ``before`` (what pruning would
        delete)."""
        ...


class CommandPublisher(Protocol):
    """Sends commands onto their queues (the message's task id is the command id)."""

    def publish(
        self,
        task_name: str,
        payload: Mapping[str, Any],
        *,
        command_id: str,
        queue: str | None = None,
        priority: int | None = None,
    ) -> None:
        """Publish, retrying a broker hiccup briefly; raises if the message could not go."""
        ...

    def batch(self) -> AbstractContextManager[CommandPublisher]:
        """A publisher whose messages go to the broker together when the block ends: one
        round trip for a sweep's hundreds rather than one each. Inside the block ``publish``
        raises only for a message that cannot be built. The end raises if the batch could
        not go, and then any of its messages may have gone: a command is idempotent by its
        id, so publishing one again is harmless."""
        ...


class DeadLetterStore(Protocol):
    """Where messages that are not commands are kept for an operator."""

    def add(
        self,
        raw: bytes,
        *,
        queue: str,
        reason: str,
        task: str | None = None,
        task_id: str | None = None,
    ) -> str:
        """Keep ``raw`` with why it was refused; returns the dead letter's id."""
        ...


@dataclass(frozen=True)
class RunnerPolicy:
    """How the runner and the sweeps pace work (from the settings)."""

    retry_max_attempts: int
    retry_base_delay_seconds: float
    retry_max_delay_seconds: float
    stalled_after: timedelta
    due_changes_batch_size: int
    due_changes_interval_seconds: float
    command_retention: CommandRetention
    reconcile_reads_per_sweep: int = 0
    """Rows the reconciliation sweep re-reads from the provider each time it runs."""
    mask_personal_data: bool = True
    """Whether what Celery shows of a command (its result, its error) has personal data
    masked (``domain.redaction``)."""
    pending_account_redrive_after: timedelta = timedelta(seconds=900)
    """How long an account stays ``pending`` before beat sends its registration again."""
    relay_after_command: bool = True
    """Whether a command relays the outbox as it finishes (off only in benchmarks: beat's
    sweep relays the events then)."""


class Application(HandlerContext, Protocol):
    """Everything a Celery task runs with: the handler context, plus the command log, the
    publisher, the dead letters and the rate budget. Built once per process by the
    composition root (``worker.bootstrap``) and handed to the tasks through their app."""

    @property
    def commands(self) -> CommandJournal: ...

    @property
    def policy(self) -> RunnerPolicy: ...

    def publisher(self) -> CommandPublisher: ...

    def dead_letters(self) -> DeadLetterStore: ...

    def rate_budget(self) -> RateBudget: ...

    def event_stream(self) -> EventStream: ...

    def webhook_sender(self) -> WebhookSender: ...

    @property
    def deliveries(self) -> DeliveryPolicy: ...

    def relay_lock(self) -> RelayLock: ...

    def relay_soon(self, relay: Callable[[], bool]) -> None:
        """Run ``relay`` soon, in the background of this process, and return at once.
        Requests made while one waits or runs share a run: under load, one relay carries
        the events of many commands. A ``relay`` that returns ``False`` (another relay held
        the lock) is run again after a pause."""
        ...

    def is_transient(self, error: BaseException) -> bool:
        """Whether ``error`` is an infrastructure hiccup (a busy or unreachable database)."""
        ...
