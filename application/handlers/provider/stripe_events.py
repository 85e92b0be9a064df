"""Stripe's events in, coalesced per object: the command each handled event leads to.

An event is only a hint to re-read its object, so the reads, not the events, are what we
count: the events of one object that arrive while its sync waits for a worker join that sync
(one read for all of them), and an event older than the object's last read asks for none.
Nothing is lost: an event joins only a sync that has not started reading yet
(``SYNC_NOT_YET_READ``); once one runs, the next event records the next one, whose read comes
after it (``SyncStripeObject.command_ids_for``).

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
from domain.provider.sync import SYNC_NOT_YET_READ, ProviderEvent, SyncStripeObject, read_since

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
    ours = reads_of(FindReadsOf(event.object_type, event.object_id), ctx)
    if read_since(event.created, ours.last_read):
        return Intake(command_id=None, recorded=False)
    commands = ctx.intake
    candidates = SyncStripeObject.command_ids_for(
        event.object_type, event.object_id, ours.last_read or ours.kept_since, ctx.clock.now()
    )
    for _, command_id in zip(range(MAX_GENERATIONS_TRIED), candidates, strict=False):
        existing = commands.get(command_id)
        if existing is not None:
            if _waits(existing) or _recorded_for(existing, event):
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
            record = accept(command, commands, ctx.publisher(), client_id=None)
        except DuplicateCommand:
            # Another delivery recorded it at this instant: join it if it still waits.
            existing = commands.get(command_id)
            if existing is not None and _waits(existing):
                return Intake(command_id=existing.id, recorded=False)
            continue
        return Intake(command_id=record.id, recorded=True)
    raise RuntimeError(f"no free sync generation for {event.object_type} {event.object_id}")


def _recorded_for(record: LoggedCommand, event: ProviderEvent) -> bool:
    """Whether an earlier delivery of ``event`` recorded this sync (Stripe delivers at least
    once): its read began after that delivery, and covers the event."""
    return record.type == SyncStripeObject.TASK_NAME and record.payload.get("event_id") == event.id


def _waits(record: LoggedCommand) -> bool:
    """Whether the sync has not started reading yet (an event now is covered by its read)."""
    return record.type == SyncStripeObject.TASK_NAME and record.status in SYNC_NOT_YET_READ
