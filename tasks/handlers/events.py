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
from domain.sweeps import PublishDeliveries, RelayEvents
from tasks.handlers.webhook_deliveries import fan_out, publish_deliveries

logger = logging.getLogger(__name__)

RELAY_BATCH_SIZE = 200
MAX_RUN_SECONDS = 10.0
"""A run stops taking batches after this long (the relay's lock lasts 30 s)."""
MAX_RUNS = 3
"""Runs one relay makes while events keep arriving behind it."""


def relay_events(request: RelayEvents, app: Application) -> int:
    """Publish what the outbox holds unpublished; returns how many events went. Does nothing
    when another relay runs: that one looks at the outbox again once it let go of the lock
    (the lock tells it another relay came by), so an event committed while it ran is not
    left for beat. A sweep's relay also runs again while a backlog is left; a command's
    leaves a backlog to beat."""
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
        if not wanted and (drained or request.after_command):
            break
    if published:
        level = logging.DEBUG if request.after_command else logging.INFO
        logger.log(level, "relayed %d events", published)
    return published


def _publish_unpublished(app: Application, max_batches: int) -> tuple[int, bool]:
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
