"""The application in memory: every port a fake, as a test scripts and reads it."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from domain.errors import FailedPrecondition, NotFound, error_info
from domain.operations.retention import CommandRetention
from domain.ports.application import (
    Application,
    Clock,
    CommandLogContext,
    OutboxContext,
    ProviderBudget,
    PublishingContext,
    RunnerPolicy,
)
from domain.ports.commands import CommandJournal
from domain.ports.events import EventStream, RelayLock, WebhookSender
from domain.ports.provider import BillingProvider
from domain.ports.repositories import UnitOfWork
from domain.provider.rate_budget import BudgetUsage, CallKind, Priority, RateBudget
from domain.subscriptions.proration import ProrationBehavior
from domain.webhooks import DeliveryPolicy
from tests.support.fakes.clock import FakeClock
from tests.support.fakes.database import DatabaseUnavailable, FakeDatabase, FakeUnitOfWork
from tests.support.fakes.events import FakeEventStream, FakeRelayLock, FakeWebhookSender
from tests.support.fakes.journal import FakeCommandJournal
from tests.support.fakes.messaging import FakeDeadLetters, FakePublisher
from tests.support.fakes.provider import FakeBillingProvider


class UnmeteredRateBudget:
    """A budget that never makes a call wait (``domain.provider.rate_budget.RateBudget``), as the
    real one is when no Stripe key is set."""

    enabled = False

    def acquire(self, kind: CallKind, priority: Priority) -> float:
        return 0.0

    def rate_limited(self, kind: CallKind, retry_after: float | None) -> None:
        return None

    def effective_rate(self, kind: CallKind) -> float:
        return float("inf")

    def usage(self) -> BudgetUsage:
        return BudgetUsage(account="", mode="", burst=0, max_wait_seconds=0.0, kinds={})


@dataclass(frozen=True)
class FakeBillingPolicy:
    """``domain.ports.provider.BillingPolicy`` with the settings' defaults (Stripe's key window less
    an hour)."""

    default_currency: str = "usd"
    provider_idempotency_window: timedelta = timedelta(hours=23)
    proration_behavior: ProrationBehavior = "create_prorations"
    change_lease: timedelta = timedelta(minutes=15)
    period_end_lead: timedelta = timedelta(hours=1)
    staged_change_guard: timedelta = timedelta(seconds=5)


DEFAULT_RUNNER_POLICY = RunnerPolicy(
    retry_max_attempts=4,
    retry_base_delay_seconds=0.2,
    retry_max_delay_seconds=5.0,
    stalled_after=timedelta(seconds=60),
    due_changes_batch_size=100,
    due_changes_interval_seconds=1.0,
    command_retention=CommandRetention(
        succeeded_for=timedelta(days=30),
        failed_for=timedelta(days=90),
        batch_size=1000,
        max_batches_per_sweep=100,
    ),
)

DEFAULT_DELIVERY_POLICY = DeliveryPolicy(
    base_delay=timedelta(seconds=5),
    max_delay=timedelta(hours=1),
    budget=timedelta(days=1),
    lease=timedelta(seconds=60),
    timeout=timedelta(seconds=10),
)


class FakeStackClock:
    """The local stack's clock: an offset from real time, in seconds."""

    def __init__(self) -> None:
        self.offset_seconds = 0.0

    def offset(self) -> float:
        return self.offset_seconds

    def advance(self, seconds: float) -> float:
        self.offset_seconds += seconds
        return self.offset_seconds

    def reset(self) -> None:
        self.offset_seconds = 0.0


class FakeApplication:
    """Every port in memory: a ``domain.ports.application.Application`` (and so each of its
    parts: ``HandlerContext``, ``PublishingContext``, ``CommandLogContext``, ``OutboxContext``,
    ``ProviderBudget``).

    Each part is an attribute a test reads and scripts: ``db``, ``provider``, ``commands``,
    ``published``, ``dead``. ``is_transient`` says yes to :class:`DatabaseUnavailable`, the
    fake database's own failure, as the real application says yes to a lock timeout.
    """

    def __init__(
        self,
        *,
        clock: FakeClock | None = None,
        billing: FakeBillingPolicy | None = None,
        policy: RunnerPolicy = DEFAULT_RUNNER_POLICY,
        with_provider: bool = True,
        deliveries: DeliveryPolicy = DEFAULT_DELIVERY_POLICY,
    ) -> None:
        self.clock = clock or FakeClock()
        self.billing = billing or FakeBillingPolicy()
        self.policy = policy
        self.db = FakeDatabase()
        self.provider = FakeBillingProvider(self.clock)
        self.commands = FakeCommandJournal(self.clock)
        self.published = FakePublisher()
        self.dead = FakeDeadLetters()
        self.budget = UnmeteredRateBudget()
        self.commands.outbox = self.db
        self.stream = FakeEventStream()
        self.webhooks = FakeWebhookSender()
        self.lock = FakeRelayLock()
        self.deliveries = deliveries
        self._with_provider = with_provider
        self.replayable: dict[str, str] = {}
        """Dead letters a replay puts back, by id: their queues."""
        self.client_secrets: dict[str, str] = {}
        """The API clients' secrets, by client id (a rotation replaces one)."""
        self.local_clock: FakeStackClock | None = None
        """The local stack's clock, where a test gives it one."""

    def unit_of_work(self) -> FakeUnitOfWork:
        return self.db.unit_of_work()

    def billing_provider(self) -> FakeBillingProvider:
        if not self._with_provider:
            # As adapters.provider.stripe_adapter.build_provider without an API key.
            raise FailedPrecondition(
                "no billing provider is configured",
                details=[error_info("PROVIDER_NOT_CONFIGURED")],
            )
        return self.provider

    def publisher(self) -> FakePublisher:
        return self.published

    def replay_dead_letter(self, letter_id: str) -> str:
        """The queue of a letter scripted in ``replayable``; ``NotFound`` for another."""
        if letter_id not in self.replayable:
            raise NotFound.resource("dead_letter", letter_id)
        return self.replayable.pop(letter_id)

    def dead_letters(self) -> FakeDeadLetters:
        return self.dead

    def rotate_client_secret(self, client_id: str) -> str:
        """A new secret for a client of ``client_secrets``; ``NotFound`` for another."""
        if client_id not in self.client_secrets:
            raise NotFound.resource("client", client_id)
        self.client_secrets[client_id] = secret = f"secret-{uuid.uuid4().hex}"
        return secret

    def stack_clock(self) -> FakeStackClock:
        """``local_clock``; ``FailedPrecondition`` without, as without a local stack."""
        if self.local_clock is None:
            raise FailedPrecondition("the clock can only move on a local stack")
        return self.local_clock

    def rate_budget(self) -> UnmeteredRateBudget:
        return self.budget

    def event_stream(self) -> FakeEventStream:
        return self.stream

    def webhook_sender(self) -> FakeWebhookSender:
        return self.webhooks

    def relay_lock(self) -> FakeRelayLock:
        return self.lock

    def relay_soon(self, relay: Callable[[], bool]) -> None:
        """At once: a test sees the relay's effect when the command returns (the worker's
        background relay is proven in tests/integration/test_relay_thread.py)."""
        relay()

    def events_written(self) -> int:
        return self.db.events_written

    def is_transient(self, error: BaseException) -> bool:
        return isinstance(error, DatabaseUnavailable)


def _conforms_to_the_ports(app: FakeApplication) -> None:
    """Never called: mypy checks here that each fake is what its port asks for."""
    application: Application = app
    publishing: PublishingContext = app
    command_log: CommandLogContext = app
    outbox: OutboxContext = app
    provider_budget: ProviderBudget = app
    unit_of_work: UnitOfWork = app.unit_of_work()
    provider: BillingProvider = app.provider
    journal: CommandJournal = app.commands
    clock: Clock = app.clock
    budget: RateBudget = app.budget
    stream: EventStream = app.stream
    sender: WebhookSender = app.webhooks
    lock: RelayLock = app.lock
    del (
        application,
        publishing,
        command_log,
        outbox,
        provider_budget,
        unit_of_work,
        provider,
        journal,
        clock,
        budget,
        stream,
        sender,
        lock,
    )
