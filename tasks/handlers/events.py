"""The outbox's relay: events written with the changes that caused them are published onto
the Redis stream and turned into webhook deliveries.

Every command runs the relay right after its outcome is recorded, and beat runs it every
``BILLING_EVENTS_RELAY_INTERVAL_SECONDS`` for what a dead worker left behind. One relay runs
at a time (a Redis lock), taking the events in outbox order, so that the events of a subject
go out in the order they happened. A relay that dies between adding events to the stream and
recording that it did adds them again: delivery is at least once, and consumers deduplicate
by event id.
"""

from __future__ import annotations

import logging
import time

from domain.ports import Application
from tasks.handlers.webhook_deliveries import fan_out, publish_deliveries

logger = logging.getLogger(__name__)

RELAY_BATCH_SIZE = 200
MAX_BATCHES_PER_RUN = 50
"""A run's work is bounded; what is left goes with the next command or sweep."""
MAX_RUN_SECONDS = 10.0
"""A run stops taking batches after this long (the relay's lock lasts 30 s)."""
AFTER_COMMAND_BATCHES = 2
"""What a command relays at most before it returns; a backlog is beat's."""
MAX_RUNS = 3
"""Runs one relay makes while events keep arriving behind it."""


def relay_events(app: Application, *, max_batches: int = MAX_BATCHES_PER_RUN) -> int:
    """Publish what the outbox holds unpublished; returns how many events went. Does nothing
    when another relay runs: that one looks at the outbox again once it let go of the lock,
    so an event committed while it ran (whose own relay found the lock taken) is not left
    for beat."""
    published = 0
    for _ in range(MAX_RUNS):
        lock = app.relay_lock()
        if not lock.acquire():
            break
        try:
            published += _publish_unpublished(app, max_batches)
        finally:
            lock.release()
        with app.unit_of_work() as uow:
            if uow.events.count_unpublished() == 0:
                break
    if published:
        logger.info("relayed %d events", published)
    return published


def _publish_unpublished(app: Application, max_batches: int) -> int:
    """Batches in outbox order, for at most :data:`MAX_RUN_SECONDS`: well within the lock's
    life, so that no other relay can start meanwhile and overtake a subject's events."""
    published = 0
    started = time.monotonic()
    for _ in range(max_batches):
        if time.monotonic() - started > MAX_RUN_SECONDS:
            break
        with app.unit_of_work() as uow:
            batch = uow.events.unpublished(RELAY_BATCH_SIZE)
            endpoints = uow.webhook_endpoints.enabled() if batch else []
        if not batch:
            break
        # Outside any transaction: the stream first, then the record that it was done.
        app.event_stream().append(batch)
        now = app.clock.now()
        with app.unit_of_work() as uow:
            claims = fan_out(uow, batch, endpoints, now, app.deliveries)
            uow.events.mark_published([event.sequence for event in batch], now)
            uow.commit()
        publish_deliveries(app, claims)
        published += len(batch)
        if len(batch) < RELAY_BATCH_SIZE:
            break
    return published


def relay_after_command(app: Application) -> None:
    """The relay run by a command once its outcome is recorded: a failure here loses
    nothing (beat's sweep publishes what is left), so it is logged, never raised. Skipped
    only when a benchmark measures what it costs (``RunnerPolicy.relay_after_command``)."""
    if not app.policy.relay_after_command:
        return
    try:
        relay_events(app, max_batches=AFTER_COMMAND_BATCHES)
    except Exception:
        logger.warning("could not relay events now; beat's sweep will", exc_info=True)
