"""The outbox's relay: events written with the changes that caused them are published onto
the Redis stream and turned into webhook deliveries.

A worker process relays its commands' events as they finish, in the background and
coalesced (:func:`relay_for_commands`), and beat relays every
``BILLING_EVENTS_RELAY_INTERVAL_SECONDS`` what a dead worker left behind. One relay runs
at a time (a Redis lock), taking the events in outbox order, so that the events of a subject
go out in the order they happened. A relay that dies between adding events to the stream and
recording that it did adds them again: delivery is at least once, and consumers deduplicate
by event id.
"""

from __future__ import annotations

import logging
import time

from application.handlers.events.webhook_deliveries import fan_out, publish_deliveries
from application.requests.sweeps import PublishDeliveries, RelayEvents
from domain.ports.application import OutboxContext

logger = logging.getLogger(__name__)

RELAY_BATCH_SIZE = 200
MAX_RUN_SECONDS = 4.0
"""A run stops taking batches after this long (the relay's lock lasts 10 s)."""
MAX_RUNS = 3
"""Runs one relay makes while events keep arriving behind it."""
COMMANDS_BATCHES = 2
"""What a worker process's relay for its commands publishes at most in one run; a backlog
is beat's."""


def relay_for_commands(request: RelayEvents, app: OutboxContext) -> bool:
    """The relay a worker process runs for the commands it finished (coalesced:
    ``OutboxContext.relay_soon``): one run, at most ``request.max_batches`` batches
    (:data:`COMMANDS_BATCHES`). Returns
    ``False`` when another relay holds the lock: the process asks again after its pause. (Its
    note makes a sweep's relay run again; a commands' relay does not, so that the relays of
    busy processes do not follow one another without a pause.)"""
    lock = app.relay_lock()
    if not lock.acquire():
        return False
    try:
        published, _ = _publish_unpublished(app, request.max_batches)
    finally:
        lock.release()
    if published:
        logger.debug("relayed %d events", published)
    return True


def relay_events(request: RelayEvents, app: OutboxContext) -> int:
    """Beat's relay: publish what the outbox holds unpublished; returns how many events went.
    Does nothing when another relay runs. Runs again (up to :data:`MAX_RUNS`) while a
    backlog is left, or when another relay came by while it ran (the lock tells it)."""
    published = 0
    for _ in range(MAX_RUNS):
        lock = app.relay_lock()
        if not lock.acquire():
            break
        drained = True
        try:
            went, drained = _publish_unpublished(app, request.max_batches)
            published += went
        finally:
            wanted = lock.release()
        if not wanted and drained:
            break
    if published:
        logger.info("relayed %d events", published)
    return published


def _publish_unpublished(app: OutboxContext, max_batches: int) -> tuple[int, bool]:
    """Batches in outbox order, for at most :data:`MAX_RUN_SECONDS`: well within the lock's
    life, so that no other relay can start meanwhile and overtake a subject's events. Returns
    how many went, and whether the outbox was drained."""
    published = 0
    started = time.monotonic()
    for _ in range(max_batches):
        if time.monotonic() - started > MAX_RUN_SECONDS:
            break
        with app.unit_of_work() as uow:
            batch = uow.events.unpublished(RELAY_BATCH_SIZE)
            endpoints = uow.webhook_endpoints.enabled() if batch else []
        if not batch:
            return published, True
        # Outside any transaction: the stream first, then the record that it was done.
        app.event_stream().append(batch)
        now = app.clock.now()
        with app.unit_of_work() as uow:
            claims = fan_out(uow, batch, endpoints, now, app.deliveries)
            uow.events.mark_published([event.sequence for event in batch], now)
            uow.commit()
        publish_deliveries(PublishDeliveries(claims), app)
        published += len(batch)
        if len(batch) < RELAY_BATCH_SIZE:
            return published, True
    return published, False
