"""Ports: what the handlers need from the outside world, as Protocols.

Adapters in ``worker/`` implement them (SQLAlchemy, Stripe); the handlers in
``application/`` only
see these. This module holds the application's: the clock, what a handler is given
(:class:`HandlerContext`) and what a task runs with (:class:`Application`), in named parts: the
publisher, the command log's side, the outbox's side, the provider's budget. The ports they are
made of live with their aggregates: the repositories and the unit of work in
``domain.ports.repositories``, the billing provider in ``domain.ports.provider``, the command log,
publishing and the dead letters in ``domain.ports.commands``, the outbox and the webhooks in
``domain.ports.events``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from domain.operations.retention import CommandRetention
from domain.ports.broker import BrokerPrimary
from domain.ports.commands import (
    CommandIntake,
    CommandJournal,
    CommandPublisher,
    DeadLetterStore,
)
from domain.ports.events import EventStream, RelayLock, WebhookSender
from domain.ports.provider import BillingPolicy, BillingProvider
from domain.ports.repositories import UnitOfWork
from domain.provider.rate_budget import RateBudget
from domain.webhooks import DeliveryPolicy


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware UTC."""
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
    due_changes_run_seconds: float = 0.02
    """How long one run of the due-changes sweep starts new work; a run that stops with due
    work left asks for the next run at once."""
    reconcile_reads_per_sweep: int = 0
    """Provider reads (calls: a page of a list is one) the reconciliation sweep makes each
    time it runs."""
    mask_personal_data: bool = True
    """Whether what Celery shows of a command (its result, its error) has personal data
    masked (``domain.redaction``)."""
    pending_account_redrive_after: timedelta = timedelta(seconds=900)
    """How long an account stays ``pending`` before beat sends its registration again."""
    running_given_up_after: timedelta | None = None
    """How long a command may stay ``running`` before the stalled-command sweep takes its
    message for lost and publishes it again: the broker's visibility timeout (after which it
    hands a dead worker's message back itself) plus ``stalled_after``. ``None``: never."""


class PublishingContext(HandlerContext, Protocol):
    """The handler context and the publisher: what sends messages onto the queue (commands
    sent again, webhook deliveries), once the change they follow is committed."""

    def publisher(self) -> CommandPublisher: ...


class IntakeContext(PublishingContext, Protocol):
    """The handler context, the publisher and the command log where commands are accepted
    (recorded, then published at once): what Stripe's events are taken in with, each one
    joined to its object's waiting sync or recorded as a new one
    (``application/handlers/provider/stripe_events.py``)."""

    @property
    def intake(self) -> CommandIntake: ...


class CommandLogContext(PublishingContext, Protocol):
    """The command log's side: what was asked (the journal), beside the publisher that sends
    commands again, and the dead letters of what could not be read. What an operator's retry
    runs with."""

    @property
    def commands(self) -> CommandJournal: ...

    def dead_letters(self) -> DeadLetterStore: ...


class StackClock(Protocol):
    """The local stack's clock: the Stripe emulator's offset from real time and the
    application's copy of it, moved together (``worker/local/stack_clock.py``)."""

    def offset(self) -> float:
        """How far ahead of real time the clock is, in seconds."""
        ...

    def advance(self, seconds: float) -> float:
        """Move the clock ahead by ``seconds`` (the emulator's first); answers the offset."""
        ...

    def reset(self) -> None:
        """Bring the clock back to real time."""
        ...


class OperatorContext(CommandLogContext, Protocol):
    """What an operator's actions run with (``application/operator_actions.py``): the command
    log's side, and what only an adapter can do: the dead letters' replay, an API client's
    new secret, the local stack's clock."""

    def replay_dead_letter(self, letter_id: str) -> str:
        """Put the dead letter's message back on its queue, if a worker can take it now, and
        drop the letter; answers the queue. ``NotFound`` without it, ``FailedPrecondition``
        saying why when it still cannot be taken."""
        ...

    def rotate_client_secret(self, client_id: str) -> str:
        """Give the API client a new secret and answer it (the old one stops working);
        ``NotFound`` without it."""
        ...

    def stack_clock(self) -> StackClock:
        """The local stack's clock; ``FailedPrecondition`` where there is none to move."""
        ...


class FailoverContext(CommandLogContext, Protocol):
    """The command log's side and a look at the broker's primary: what the failover sweep
    runs with (``application/handlers/operations/failover.py``)."""

    @property
    def policy(self) -> RunnerPolicy: ...

    def broker_primary(self) -> BrokerPrimary: ...

    def event_stream(self) -> EventStream:
        """The stream the sweep appends again what a failover took from it."""
        ...

    def relay_lock(self) -> RelayLock: ...


class OutboxContext(PublishingContext, Protocol):
    """The outbox's side: the event stream the relay appends to, the lock one relay holds at a
    time, the relay in the background of this process, and the webhooks' sender and delivery
    policy (deliveries go out through the publisher). What the relay and the webhooks' handlers
    run with."""

    def event_stream(self) -> EventStream: ...

    def relay_lock(self) -> RelayLock: ...

    def relay_soon(self, relay: Callable[[], bool]) -> None:
        """Run ``relay`` soon, in the background of this process, and return at once.
        Requests made while one waits or runs share a run: under load, one relay carries
        the events of many commands. A ``relay`` that returns ``False`` (another relay held
        the lock) is run again after a pause."""
        ...

    def events_written(self) -> int:
        """How many events this process has written to the outbox so far (committed or not):
        a command during which it did not change wrote none, and asks for no relay."""
        ...

    def webhook_sender(self) -> WebhookSender: ...

    @property
    def deliveries(self) -> DeliveryPolicy: ...


class ProviderBudget(Protocol):
    """The provider account's rate budget, shared by every process: what a sweep may claim."""

    def rate_budget(self) -> RateBudget: ...


class Application(CommandLogContext, OutboxContext, ProviderBudget, Protocol):
    """Everything a Celery task runs with, in parts: the handler context and its publisher
    (:class:`PublishingContext`), the command log's side (:class:`CommandLogContext`), the
    outbox's side (:class:`OutboxContext`), the provider's rate budget
    (:class:`ProviderBudget`); and here, how the runner and the sweeps pace work and which
    errors the runner retries. Built once per process by the composition root
    (``worker.bootstrap``) and handed to the tasks through their app. A handler or sweep
    declares the narrowest part it needs."""

    @property
    def policy(self) -> RunnerPolicy: ...

    def is_transient(self, error: BaseException) -> bool:
        """Whether ``error`` is an infrastructure hiccup (a busy or unreachable database)."""
        ...
