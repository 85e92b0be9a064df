"""The composition root: the one place where adapters are chosen and wired.

:func:`bootstrap` gives this process's :class:`Services`, the
:class:`domain.ports.application.Application` that tasks, the API and the CLI run handlers with.
Every client (database engine, Redis, Stripe, the rate budget) is built on first use, never at
import, and built again in a forked child.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING

from sqlalchemy.orm import Session, sessionmaker

from adapters.clock import ShiftableClock, SystemClock, clock_client
from adapters.db.command_log import SqlCommandLog
from adapters.db.engine import ping, session_factory
from adapters.db.uow import SqlUnitOfWork, is_transient_db_error
from domain.operations.console import ConsoleQueries
from domain.operations.retention import CommandRetention
from domain.ports.application import Clock, RunnerPolicy, StackClock
from domain.ports.broker import BrokerPrimary
from domain.ports.clients import ClientVerifier
from domain.ports.commands import CommandIntake, CommandPublisher, DeadLetterStore
from domain.ports.events import EventStream, RelayLock, WebhookSender
from domain.ports.provider import BillingProvider
from domain.ports.repositories import OrganizationDirectory, UnitOfWork
from domain.provider.rate_budget import RateBudget
from domain.subscriptions.proration import ProrationBehavior
from domain.webhooks import DeliveryPolicy
from worker.settings import Settings, get_settings

if TYPE_CHECKING:
    import redis
    from celery import Celery
    from prometheus_client.registry import Collector

    from adapters.messaging.heartbeats import Heartbeats
    from adapters.messaging.sweep_successes import SweepSuccesses
    from adapters.observability.gauges import DatabaseFigures
    from adapters.outbound.relay_thread import BackgroundRelay


@dataclass(frozen=True)
class BillingSettings:
    default_currency: str
    provider_idempotency_window: timedelta
    proration_behavior: ProrationBehavior = "create_prorations"
    change_lease: timedelta = timedelta(minutes=15)
    period_end_lead: timedelta = timedelta(hours=1)
    staged_change_guard: timedelta = timedelta(seconds=5)

    @classmethod
    def of(cls, settings: Settings) -> BillingSettings:
        return cls(
            default_currency=settings.default_currency,
            provider_idempotency_window=timedelta(
                seconds=settings.provider_idempotency_window_seconds
            ),
            proration_behavior=settings.proration_behavior,
            change_lease=timedelta(seconds=settings.scheduled_change_lease_seconds),
            period_end_lead=timedelta(seconds=settings.period_end_lead_seconds),
            staged_change_guard=timedelta(seconds=settings.staged_change_guard_seconds),
        )


@dataclass
class Services:
    """This process's adapters, behind the ports the handlers know."""

    settings: Settings
    clock: Clock
    commands: SqlCommandLog
    sessions: sessionmaker[Session] | None = field(default=None, repr=False)
    """The database's sessions; ``None``: the settings' database, built on first use."""
    max_budget_wait_seconds: float | None = None
    """How long a provider call may wait in the rate budget; ``None``: the settings'."""
    celery: Celery | None = field(default=None, repr=False)
    """The Celery app this process publishes with: the workers' own app in a worker (it
    hands itself over), else one built from the settings on first use."""
    background_relay: BackgroundRelay | None = field(default=None, repr=False)
    """What relays the outbox in the background once a command finished; ``None``: a
    ``CoalescingRelay`` pausing as the settings say, built on first use."""
    _provider: BillingProvider | None = field(default=None, repr=False)
    _budget: RateBudget | None = field(default=None, repr=False)
    _redis_client: redis.Redis | None = field(default=None, repr=False)
    _primary_watch: BrokerPrimary | None = field(default=None, repr=False)
    _recorded_provider: BillingProvider | None = field(default=None, repr=False)
    local_clock: StackClock | None = field(default=None, repr=False)
    """The local stack's clock, where the command beside it hands it over (``clock
    advance``: ``worker/local/stack_clock.py``); ``None`` elsewhere."""

    @cached_property
    def billing(self) -> BillingSettings:
        return BillingSettings.of(self.settings)

    @cached_property
    def policy(self) -> RunnerPolicy:
        settings = self.settings
        return RunnerPolicy(
            retry_max_attempts=settings.retry_max_attempts,
            retry_base_delay_seconds=settings.retry_base_delay_seconds,
            retry_max_delay_seconds=settings.retry_max_delay_seconds,
            stalled_after=timedelta(seconds=settings.stalled_command_seconds),
            running_given_up_after=timedelta(
                seconds=settings.broker_visibility_timeout_seconds
                + settings.stalled_command_seconds
            ),
            due_changes_batch_size=settings.scheduled_changes_batch_size,
            due_changes_interval_seconds=settings.scheduled_changes_interval_seconds,
            due_changes_run_seconds=settings.scheduled_changes_run_seconds,
            command_retention=CommandRetention(
                succeeded_for=timedelta(days=settings.command_retention_days),
                failed_for=timedelta(days=settings.failed_command_retention_days),
                rejected_for=timedelta(days=settings.rejected_command_retention_days),
                batch_size=settings.command_retention_batch,
                max_batches_per_sweep=settings.command_retention_max_batches,
                rest_ratio=settings.command_retention_rest_ratio,
            ),
            mask_personal_data=settings.mask_personal_data,
            reconcile_reads_per_sweep=max(
                1, round(settings.reconcile_reads_per_second * settings.reconcile_interval_seconds)
            ),
            pending_account_redrive_after=timedelta(
                seconds=settings.pending_account_redrive_after_seconds
            ),
        )

    @cached_property
    def deliveries(self) -> DeliveryPolicy:
        settings = self.settings
        return DeliveryPolicy(
            base_delay=timedelta(seconds=settings.webhook_retry_base_seconds),
            max_delay=timedelta(seconds=settings.webhook_retry_max_seconds),
            budget=timedelta(seconds=settings.webhook_retry_budget_seconds),
            lease=timedelta(seconds=settings.webhook_lease_seconds),
            timeout=timedelta(seconds=settings.webhook_timeout_seconds),
        )

    def event_stream(self) -> EventStream:
        return self._event_stream

    @cached_property
    def _event_stream(self) -> EventStream:
        from adapters.messaging.primary_confirmation import named_primary
        from adapters.outbound.stream import RedisEventStream

        return RedisEventStream(
            self._redis(),
            self.settings.events_stream,
            self.settings.events_stream_maxlen,
            named_primary(self.settings),
        )

    def relay_lock(self) -> RelayLock:
        from adapters.outbound.stream import RedisRelayLock

        return RedisRelayLock(self._redis(), f"{self.settings.events_stream}:relay-lock")

    def relay_soon(self, relay: Callable[[], bool]) -> None:
        if self.background_relay is None:
            from adapters.outbound.relay_thread import CoalescingRelay, node_relays

            self.background_relay = CoalescingRelay(
                self.settings.events_relay_coalesce_seconds, node=node_relays()
            )
        self.background_relay.request(relay)

    def events_written(self) -> int:
        from adapters.db.events import events_written_here

        return events_written_here()

    def flush_relay(self) -> None:
        """Run the relay this process asked for before it exits (a child that stops)."""
        if self.background_relay is not None:
            self.background_relay.flush()

    def webhook_sender(self) -> WebhookSender:
        from adapters.outbound.webhooks import HttpWebhookSender

        return HttpWebhookSender(
            allow_private_networks=self.settings.resolved_webhook_allow_private_networks()
        )

    def sweep_successes(self) -> SweepSuccesses:
        """When each sweep last succeeded (written by the workers, read by the console)."""
        from adapters.messaging.sweep_successes import SweepSuccesses

        return SweepSuccesses(self._redis())

    def heartbeats(self) -> Heartbeats:
        """The long-running loops' heartbeats (written by each loop, read by beat's gauges and
        the API's ``/readyz``)."""
        from adapters.messaging.heartbeats import Heartbeats

        return Heartbeats(self._redis())

    def _redis(self) -> redis.Redis:
        if self._redis_client is None:
            from adapters.messaging.redis_clients import redis_client

            self._redis_client = redis_client(self.settings)
        return self._redis_client

    def celery_app(self) -> Celery:
        """This process's one Celery app (see :attr:`celery`)."""
        if self.celery is None:
            from adapters.messaging.publisher import publishing_app

            self.celery = publishing_app(self.settings)
        return self.celery

    @cached_property
    def _publisher(self) -> CommandPublisher:
        from adapters.messaging.publisher import CeleryPublisher

        return CeleryPublisher(self.celery_app())

    def publisher(self) -> CommandPublisher:
        """This process's one publisher, over :meth:`celery_app`."""
        return self._publisher

    @property
    def intake(self) -> CommandIntake:
        """The command log where commands are accepted (recorded, then published at once):
        what Stripe's events are taken in with."""
        return self.commands

    def system_collector(self) -> Collector:
        """Beat's collector of the whole system's gauges, over this process's clock,
        database, broker and Stripe budget."""
        from adapters.observability.gauges import SystemCollector
        from adapters.provider.rate_budget import UnmeteredBudget

        budget = self.rate_budget()
        heartbeats = self.heartbeats()
        silence = self.settings.loop_silence_seconds
        return SystemCollector(
            clock=self.clock,
            read_queue_depths=self.queue_depths(),
            read_database=self.system_figures(),
            budget=None if isinstance(budget, UnmeteredBudget) else budget,
            read_heartbeats=lambda: heartbeats.silences(silence),
        )

    def queue_depths(self) -> Callable[[], Mapping[str, int]]:
        """A reader of every consumed queue's depth, from the broker (beat's gauges, the
        console's home page)."""
        from adapters.messaging.config import CONSUMED_QUEUES
        from adapters.messaging.queue_depths import QueueDepths
        from adapters.messaging.redis_clients import redis_client

        steps = self.celery_app().conf.broker_transport_options.get("priority_steps") or [0]
        return QueueDepths(redis_client(self.settings, socket_timeout=2), CONSUMED_QUEUES, steps)

    def system_figures(self) -> Callable[[datetime], DatabaseFigures]:
        """A reader of the database's figures at a time (beat's gauges, the console's home
        page): failed and rejected commands, accounts pending, changes by state, drift."""
        from adapters.db.gauges import SqlSystemFigures

        lead = timedelta(seconds=self.settings.period_end_lead_seconds)
        return SqlSystemFigures(self.database(), lead)

    def broker_primary(self) -> BrokerPrimary:
        """The process's one watch of the broker's primary: it remembers its last sighting
        (a Redis restarted empty is known by it)."""
        from adapters.messaging.primary_watch import RedisPrimaryWatch

        if self._primary_watch is None:
            self._primary_watch = RedisPrimaryWatch(self._redis())
        return self._primary_watch

    def dead_letters(self) -> DeadLetterStore:
        from adapters.messaging.dead_letters import DeadLetters
        from adapters.messaging.redis_clients import redis_client

        return DeadLetters(
            redis_client(self.settings), shiftable_clock=self.settings.shiftable_clock
        )

    def replay_dead_letter(self, letter_id: str) -> str:
        """The dead letter's message back on its queue, if this release's workers can take it
        (``adapters/messaging/dead_letter_replay.py``); answers the queue."""
        from adapters.messaging.dead_letter_replay import replay_dead_letter, worker_task_names
        from adapters.messaging.dead_letters import DeadLetters
        from adapters.messaging.redis_clients import redis_client

        client = redis_client(self.settings)
        store = DeadLetters(client, shiftable_clock=self.settings.shiftable_clock)
        task_names = worker_task_names(self.celery_app())
        return replay_dead_letter(store, client, letter_id, task_names).queue

    def rotate_client_secret(self, client_id: str) -> str:
        """A new secret for the API client (``adapters/db/api_clients.py``); answers it."""
        from adapters.db.api_clients import rotate_secret

        return rotate_secret(self.database(), self.clock, client_id).secret

    def stack_clock(self) -> StackClock:
        """:attr:`local_clock`; a ``FailedPrecondition`` without one (no local stack)."""
        from domain.errors import FailedPrecondition

        if self.local_clock is None:
            raise FailedPrecondition("the clock can only move on a local stack")
        return self.local_clock

    def database(self) -> sessionmaker[Session]:
        """Sessions of this process's database (for what has no repository: API clients)."""
        return self.sessions or session_factory(
            self.settings.resolved_database_url(),
            self.settings.database_lock_timeout_seconds,
            self.settings.database_network_timeout_seconds,
        )

    def unit_of_work(self) -> UnitOfWork:
        return SqlUnitOfWork(self.database())

    def ping_database(self) -> None:
        """Raise unless this process's database answers (the API's readiness)."""
        ping(self.database())

    def client_verifier(self) -> ClientVerifier:
        """A verifier of API clients' credentials over this process's database, with its own
        cache and hashing threads (the API builds one at startup)."""
        from adapters.db.api_clients import ClientAuthenticator

        return ClientAuthenticator(
            self.database(),
            self.settings.auth_cache_seconds,
            max_concurrent_hashes=self.settings.auth_max_concurrent_hashes,
        )

    def billing_provider(self) -> BillingProvider:
        """The provider, each call of a command recorded (``application/provider_calls.py``)."""
        if self._provider is None:
            self._provider = provider_for(self.settings, self.rate_budget())
        if self._recorded_provider is None:
            from adapters.db.provider_calls import SqlProviderCallLog
            from application.provider_calls import recorded

            log = SqlProviderCallLog(self.database())
            self._recorded_provider = recorded(self._provider, log, self.clock)
        return self._recorded_provider

    def organizations(self) -> OrganizationDirectory:
        """Whether an organization exists (the API asks before it records a command)."""
        from adapters.db.repositories import SqlOrganizationDirectory

        return SqlOrganizationDirectory(self.database())

    def console(self) -> ConsoleQueries:
        """The operator console's reads (``adapters/db/timelines.py``, ``listing.py``)."""
        from adapters.db.timelines import SqlConsole

        return SqlConsole(self.database())

    def rate_budget(self) -> RateBudget:
        """The Stripe account's rate budget, shared through Redis with every process."""
        if self._budget is None:
            self._budget = budget_for(self.settings, max_wait_seconds=self.max_budget_wait_seconds)
        return self._budget

    @staticmethod
    def is_transient(error: BaseException) -> bool:
        from adapters.messaging.redis_clients import is_redis_unreachable

        return is_transient_db_error(error) or is_redis_unreachable(error)


def provider_for(settings: Settings, budget: RateBudget | None = None) -> BillingProvider:
    """The billing provider these settings name (a ``CommandError`` if none is set up)."""
    from adapters.provider.stripe_adapter import build_provider

    return build_provider(
        settings.resolved_stripe_api_key(),
        settings.stripe_api_base,
        settings.stripe_timeout_seconds,
        budget if budget is not None else budget_for(settings),
    )


def budget_for(settings: Settings, *, max_wait_seconds: float | None = None) -> RateBudget:
    """The rate budget of the Stripe account these settings name. ``max_wait_seconds``
    overrides how long a call may block (a CLI command may simply wait its turn)."""
    from adapters.messaging.redis_clients import redis_client
    from adapters.provider.rate_budget import (
        BudgetConfig,
        RedisRateBudget,
        UnmeteredBudget,
        account_key,
        default_rate,
        mode_of,
    )

    api_key = settings.resolved_stripe_api_key()
    if not api_key:
        return UnmeteredBudget()
    rate = settings.stripe_rate_per_second or default_rate(api_key)
    burst = settings.stripe_burst if settings.stripe_burst is not None else max(1, int(rate / 5))
    config = BudgetConfig(
        account=account_key(api_key, settings.stripe_api_base),
        mode=mode_of(api_key),
        rate_per_second=rate,
        burst=burst,
        max_wait_seconds=(
            settings.stripe_max_wait_seconds if max_wait_seconds is None else max_wait_seconds
        ),
        enabled=settings.stripe_budget_enabled,
    )
    return RedisRateBudget(redis_client(settings), config)


def build_clock(settings: Settings) -> Clock:
    # Only the local stack and the tests may shift time; production reads the system clock.
    if settings.shiftable_clock:
        clock = ShiftableClock(clock_client(settings))
        clock.warm()  # read once while Redis answers: a failover later keeps this offset
        return clock
    return SystemClock()


def build_services(
    settings: Settings,
    *,
    sessions: sessionmaker[Session] | None = None,
    clock: Clock | None = None,
    provider: BillingProvider | None = None,
    max_budget_wait_seconds: float | None = None,
    background_relay: BackgroundRelay | None = None,
) -> Services:
    """The services these settings name. The options replace one adapter each: a database
    (``sessions``), a ``clock`` or a ``provider`` (a test's, or ``up``'s own emulator), how
    long a provider call may wait its turn in the rate budget (a command line may wait
    longer than a task, which has a queue to go back to), and what relays the outbox after a
    command (``background_relay``: a benchmark's leaves the events to beat's sweep)."""
    clock = clock or build_clock(settings)
    return Services(
        settings=settings,
        clock=clock,
        commands=SqlCommandLog(
            sessions
            or session_factory(
                settings.resolved_database_url(),
                settings.database_lock_timeout_seconds,
                settings.database_network_timeout_seconds,
            ),
            clock,
            # A running command whose worker died is handed back by the broker after the
            # visibility timeout; until then a second delivery is a duplicate.
            running_lease=timedelta(seconds=settings.broker_visibility_timeout_seconds),
        ),
        sessions=sessions,
        max_budget_wait_seconds=max_budget_wait_seconds,
        background_relay=background_relay,
        _provider=provider,
    )


@lru_cache(maxsize=1)
def _services_for(pid: int) -> Services:
    return build_services(get_settings())


def bootstrap(*, celery: Celery | None = None) -> Services:
    """This process's services (built on first use, and again after a fork). ``celery``: the
    app of a worker process, which hands itself over so that its tasks' follow-ups go out
    through it (the first app handed over stays)."""
    services = _services_for(os.getpid())
    if celery is not None and services.celery is None:
        services.celery = celery
    return services
