"""The queues and the Celery configuration every process of ours shares: workers, beat, the
API and the CLI (which only publish), and the tests.

A leaf: it names tasks and queues and builds a configuration dict from the values it is
handed (:class:`CeleryOptions`, which the settings are), and imports nothing of the worker.
The workers' app (``worker.celery_app``) and the publishers' app
(``adapters.messaging.publisher``) are both made from it.
"""

from __future__ import annotations

from typing import Any, Protocol

from kombu import Queue

from adapters.messaging.redis_clients import RedisOptions, celery_redis_config
from adapters.messaging.transport_options import MASK_PERSONAL_DATA, SHIFTABLE_CLOCK
from application.handlers.events.webhook_deliveries import SEND_DUE_DELIVERIES
from application.handlers.operations.sweeps import (
    BULK_MESSAGE_PRIORITY,
    STRIPE_SYNC_MESSAGE_PRIORITY,
)
from application.requests.sweeps import (
    CONSUMER_HEARTBEAT,
    ENQUEUE_DUE_CHANGES,
    PRUNE_COMMAND_LOG,
    RECONCILE_WITH_STRIPE,
    REDRIVE_PENDING_ACCOUNTS,
    RELAY_EVENTS,
    REPUBLISH_STALLED_COMMANDS,
)
from domain.provider.sync import SyncStripeObject

__all__ = [
    "BULK_MESSAGE_PRIORITY",
    "CONSUMED_QUEUES",
    "ENQUEUE_DUE_CHANGES",
    "QUEUES",
    "REDRIVE_PENDING_ACCOUNTS",
    "STRIPE_SYNC_MESSAGE_PRIORITY",
    "SWEEPS",
    "TASK_MODULES",
    "celery_config",
]

SWEEPS = frozenset(
    {
        ENQUEUE_DUE_CHANGES,
        SEND_DUE_DELIVERIES,
        RELAY_EVENTS,
        RECONCILE_WITH_STRIPE,
        REDRIVE_PENDING_ACCOUNTS,
        REPUBLISH_STALLED_COMMANDS,
        PRUNE_COMMAND_LOG,
    }
)
"""The task names of beat's sweeps (each a ``tasks.runtime.SweepTask``; the beat schedule
runs exactly these: tests/unit/test_sweeps_out_of_sight.py)."""

HEARTBEAT_SECONDS = "billing_heartbeat_interval_seconds"
SILENCE_SECONDS = "billing_loop_silence_seconds"
HEARTBEAT_TASK = "billing_consumer_heartbeat_task"
"""Keys of the app's configuration that a worker node's consumer heartbeat reads
(``adapters/messaging/consumer_heartbeat.py``)."""

QUEUES = ("users", "billing", "subscriptions", "maintenance", "webhooks")
DEFAULT_PUBLISH_QUEUE = "celery"
"""Where a Celery client publishes a task when it names no queue. Workers consume it too, so
a publisher that forgets ``queue=`` loses nothing (the task runs as on its home queue)."""
CONSUMED_QUEUES = (*QUEUES, DEFAULT_PUBLISH_QUEUE)

TASK_MODULES = [
    "tasks.users",
    "tasks.billing",
    "tasks.subscriptions",
    "tasks.maintenance",
    "tasks.events",
    "tasks.webhooks",
    "tasks.stripe_sync",
]


class CeleryOptions(RedisOptions, Protocol):
    """What the Celery configuration is built from (the settings are one): Redis, and the
    sweeps' intervals, the visibility timeout, masking and the clock."""

    @property
    def broker_visibility_timeout_seconds(self) -> float: ...
    @property
    def beat_interval_seconds(self) -> float: ...
    @property
    def stalled_command_seconds(self) -> float: ...
    @property
    def scheduled_changes_interval_seconds(self) -> float: ...
    @property
    def reconcile_interval_seconds(self) -> float: ...
    @property
    def pending_account_redrive_interval_seconds(self) -> float: ...
    @property
    def command_retention_interval_seconds(self) -> float: ...
    @property
    def events_relay_interval_seconds(self) -> float: ...
    @property
    def webhook_sweep_interval_seconds(self) -> float: ...
    @property
    def mask_personal_data(self) -> bool: ...
    @property
    def shiftable_clock(self) -> bool: ...
    @property
    def heartbeat_interval_seconds(self) -> float: ...
    @property
    def loop_silence_seconds(self) -> float: ...


def celery_config(settings: CeleryOptions) -> dict[str, Any]:
    # One Redis or Sentinel's primary (adapters/messaging/redis_clients.py). Any bytes on a
    # queue become a task message or a dead letter (adapters/messaging/broker.py).
    redis_config = celery_redis_config(settings)
    visibility = settings.broker_visibility_timeout_seconds
    return {
        **redis_config,
        "worker_consumer": "adapters.messaging.broker:GuardedConsumer",
        "task_serializer": "json",
        "result_serializer": "json",
        "accept_content": ["json"],
        "result_accept_content": ["json"],
        "enable_utc": True,
        "timezone": "UTC",
        # Nothing lost: a message is acknowledged only once its task finished, and returns to
        # the queue if the worker process running it dies.
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,
        "broker_transport_options": {
            "visibility_timeout": visibility,
            # Look for messages of dead workers often enough to honour the visibility timeout
            # (kombu's default scans every ~100 s).
            "unacked_restore_interval": max(1.0, min(10.0, visibility / 3)),
            "unacked_restore_throttle": 1,
            # Interactive (0), bulk (the due changes), then the syncs of Stripe's events.
            # A message of any other priority lands in the step at or below it (9 reads 9).
            "priority_steps": [0, BULK_MESSAGE_PRIORITY, STRIPE_SYNC_MESSAGE_PRIORITY],
            MASK_PERSONAL_DATA: settings.mask_personal_data,
            SHIFTABLE_CLOCK: settings.shiftable_clock,
            **redis_config["broker_transport_options"],
        },
        "broker_connection_retry_on_startup": True,
        "task_queues": [Queue(name) for name in CONSUMED_QUEUES],
        "task_default_queue": "maintenance",
        "task_routes": {
            ENQUEUE_DUE_CHANGES: {"queue": "maintenance"},
            RELAY_EVENTS: {"queue": "maintenance"},
            # A sweep, not a delivery: never behind the deliveries it publishes.
            SEND_DUE_DELIVERIES: {"queue": "maintenance"},
            RECONCILE_WITH_STRIPE: {"queue": "maintenance"},
            # Whoever publishes it (the webhook route, the stalled-command sweep, an operator's
            # retry) publishes it last in line: a route's options fill in what the publisher
            # left unset.
            SyncStripeObject.TASK_NAME: {
                "queue": SyncStripeObject.QUEUE,
                "priority": STRIPE_SYNC_MESSAGE_PRIORITY,
            },
            REDRIVE_PENDING_ACCOUNTS: {"queue": "maintenance"},
            **{f"{name}.*": {"queue": name} for name in QUEUES},
        },
        # No STARTED state in the result backend: storing it cost every task a read and a
        # write to Redis (Celery reads the stored state before each store), about 0.45 ms of a
        # worker's CPU and two round trips (docs/benchmarks.md, 2026-11-26 h3/p1cost). Nothing
        # reads it: Flower follows the task-started event, the API's synchronous requests wake
        # on SUCCESS or FAILURE and answer from the command log, and a publisher waiting on a
        # result still gets its outcome (its AsyncResult reads PENDING until then).
        "task_track_started": False,
        "task_send_sent_event": True,
        "worker_send_task_events": True,
        # The result backend keeps a task's outcome (masked, application/command_outcomes.py),
        # not its arguments: nothing reads them there, and they hold personal data.
        "result_extended": False,
        "result_expires": 86_400,
        "beat_schedule": {
            "republish-stalled-commands": {
                "task": REPUBLISH_STALLED_COMMANDS,
                "schedule": max(
                    settings.beat_interval_seconds, settings.stalled_command_seconds / 10
                ),
                "options": {"expires": settings.beat_interval_seconds * 10},
            },
            "apply-due-plan-changes": {
                "task": ENQUEUE_DUE_CHANGES,
                "schedule": settings.scheduled_changes_interval_seconds,
                # A sweep that waited this long is superseded by the next one.
                "options": {"expires": max(settings.scheduled_changes_interval_seconds * 4, 2.0)},
            },
            "relay-events": {
                "task": RELAY_EVENTS,
                "schedule": settings.events_relay_interval_seconds,
                "options": {"expires": settings.events_relay_interval_seconds * 2},
            },
            "send-due-webhook-deliveries": {
                "task": SEND_DUE_DELIVERIES,
                "schedule": settings.webhook_sweep_interval_seconds,
                "options": {"expires": max(settings.webhook_sweep_interval_seconds * 4, 2.0)},
            },
            "reconcile-with-stripe": {
                "task": RECONCILE_WITH_STRIPE,
                "schedule": settings.reconcile_interval_seconds,
                "options": {"expires": settings.reconcile_interval_seconds},
            },
            "prune-command-log": {
                "task": PRUNE_COMMAND_LOG,
                "schedule": settings.command_retention_interval_seconds,
                # No lease: two sweeps at once delete different rows (SKIP LOCKED on
                # PostgreSQL; SQLite runs one writer at a time). One that waited a whole
                # period is superseded by the next.
                "options": {"expires": settings.command_retention_interval_seconds},
            },
            "redrive-pending-accounts": {
                "task": REDRIVE_PENDING_ACCOUNTS,
                "schedule": settings.pending_account_redrive_interval_seconds,
                # Each sweep sends what is due then; one that waited a period is superseded.
                "options": {"expires": settings.pending_account_redrive_interval_seconds},
            },
        },
        "worker_hijack_root_logger": False,
        # Each node also consumes a queue of its own (NODE.dq2), where it sends itself its
        # consumer heartbeat (adapters/messaging/consumer_heartbeat.py).
        "worker_direct": True,
        # Beat's loop beats after its ticks: it never sleeps longer than a heartbeat.
        "beat_max_loop_interval": settings.heartbeat_interval_seconds,
        HEARTBEAT_SECONDS: settings.heartbeat_interval_seconds,
        SILENCE_SECONDS: settings.loop_silence_seconds,
        HEARTBEAT_TASK: CONSUMER_HEARTBEAT,
    }
