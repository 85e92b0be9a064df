"""Stripe's events in, coalesced per object: the command each handled event leads to.

An event is only a hint to re-read its object, so the reads, not the events, are what we
count: the events of one object that arrive while its sync waits for a worker join that sync
(one read for all of them), an event older than the object's last read asks for none, and
a second delivery of an event that recorded a sync finds that sync by the event's id (Stripe
delivers at least once; the sync's read began after the first delivery). Nothing is lost: an
event joins only a sync that has not started reading yet (``SYNC_NOT_YET_READ``); once one
runs, the next event records the next one, whose read comes after it
(``SyncStripeObject.command_ids_for``).

The webhook route (``worker/api/routes/stripe_webhooks.py``) verifies and parses a delivery
and hands its event here; what to record is decided here, with one read of our copy of the
object (:func:`application.handlers.provider.sync.reads_of`).
"""

from __future__ import annotations

from dataclasses import dataclass

from application.handlers.operations.outbox import accept
from application.handlers.provider.sync import FindReadsOf, reads_of
from domain.ports.application import IntakeContext
from domain.ports.commands import DuplicateCommand, LoggedCommand
from domain.provider.sync import (
    STRIPE_WEBHOOK_SENDER,
    SYNC_NOT_YET_READ,
    ProviderEvent,
    SyncStripeObject,
    read_since,
)

MAX_GENERATIONS_TRIED = 200
"""Generations of one object tried before giving up (a taken one is a sync that started
reading since the object's last read, or within the last moments: there are never many)."""


@dataclass(frozen=True)
class Intake:
    """What became of one event: the sync that reads its object for it (``None``: a read
    began after the event already), and whether that sync is new."""

    command_id: str | None
    recorded: bool

    @property
    def outcome(self) -> str:
        """Its label in ``billing_stripe_events_received_total``."""
        if self.recorded:
            return "accepted"
        return "coalesced" if self.command_id is not None else "already_read"


def take_in_stripe_event(event: ProviderEvent, ctx: IntakeContext) -> Intake:
    """Record the sync ``event`` asks for and publish it, unless a pending sync of its object
    covers it (then the event joins that one) or a read began after it. Blocking: the API
    calls it from a worker thread."""
    if event.object_type is None or event.object_id is None:
        raise ValueError(f"event {event.id} ({event.type}) routes to no object")
    commands = ctx.intake
    if (earlier := commands.find_by_idempotency_key(STRIPE_WEBHOOK_SENDER, event.id)) is not None:
        return Intake(command_id=earlier.id, recorded=False)
    ours = reads_of(FindReadsOf(event.object_type, event.object_id), ctx)
    if read_since(event.created, ours.last_read):
        return Intake(command_id=None, recorded=False)
    candidates = SyncStripeObject.command_ids_for(
        event.object_type, event.object_id, ours.last_read or ours.kept_since, ctx.clock.now()
    )
    for _, command_id in zip(range(MAX_GENERATIONS_TRIED), candidates, strict=False):
        existing = commands.get(command_id)
        if existing is not None:
            if _waits(existing):
                return Intake(command_id=existing.id, recorded=False)
            continue  # it started reading, or is done: the next generation
        command = SyncStripeObject(
            command_id=command_id,
            object_type=event.object_type,
            object_id=event.object_id,
            event_id=event.id,
            event_type=event.type,
        )
        try:
            record = accept(
                command,
                commands,
                ctx.publisher(),
                client_id=STRIPE_WEBHOOK_SENDER,
                idempotency_key=event.id,
            )
        except DuplicateCommand:
            # Another delivery recorded a sync at this instant: of this very event (its
            # delivery twice at once), or of another event of the object; join it if it waits.
            earlier = commands.find_by_idempotency_key(STRIPE_WEBHOOK_SENDER, event.id)
            if earlier is not None:
                return Intake(command_id=earlier.id, recorded=False)
            existing = commands.get(command_id)
            if existing is not None and _waits(existing):
                return Intake(command_id=existing.id, recorded=False)
            continue
        return Intake(command_id=record.id, recorded=True)
    raise RuntimeError(f"no free sync generation for {event.object_type} {event.object_id}")


def _waits(record: LoggedCommand) -> bool:
    """Whether the sync has not started reading yet (an event now is covered by its read)."""
    return record.type == SyncStripeObject.TASK_NAME and record.status in SYNC_NOT_YET_READ
