"""Stripe's truth flowing in: its events, and how our rows follow what it holds.

Stripe tells us what happened through signed webhook events, delivered at least once and in
no guaranteed order. An event is only a hint: the handler re-reads the object it names from
Stripe and brings our rows in line with what Stripe holds *now*, so a duplicate is the same
command (keyed by the event id) and a stale event delivered last changes nothing. Beat's
reconciliation sweep re-reads the rows synced longest ago with the same handler, for when
webhooks are down, late or never configured.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, ClassVar, Literal

from pydantic import Field

from domain.messages import Command, CommandStatus, ResourceId, Result
from domain.provider.rate_budget import Priority

SUBSCRIPTION_EVENTS = frozenset(
    {
        "customer.subscription.created",
        "customer.subscription.updated",
        "customer.subscription.deleted",
        "customer.subscription.paused",
        "customer.subscription.resumed",
        "customer.subscription.pending_update_applied",
        "customer.subscription.pending_update_expired",
        "customer.subscription.trial_will_end",
    }
)
INVOICE_EVENTS = frozenset(
    {
        "invoice.paid",
        "invoice.payment_succeeded",
        "invoice.payment_failed",
        "invoice.payment_action_required",
        "invoice.marked_uncollectible",
        "invoice.voided",
    }
)
"""An invoice's payment moves its subscription's status: the subscription is re-read."""
CUSTOMER_EVENTS = frozenset({"customer.updated", "customer.deleted"})
HANDLED_EVENT_TYPES = SUBSCRIPTION_EVENTS | INVOICE_EVENTS | CUSTOMER_EVENTS
"""What our Stripe webhook endpoint subscribes to; any other type is answered 2xx and
counted, never failed."""

ObjectType = Literal["subscription", "customer"]
SyncSource = Literal["webhook", "sweep", "operator"]


@dataclass(frozen=True)
class ProviderEvent:
    """A verified Stripe event, as far as we route it: the object to re-read, if any."""

    id: str
    type: str
    created: datetime
    object_type: ObjectType | None
    object_id: str | None

    @property
    def is_handled(self) -> bool:
        return self.type in HANDLED_EVENT_TYPES and self.object_id is not None


@dataclass(frozen=True)
class ProviderCustomerState:
    """A Stripe customer as far as syncing needs it."""

    id: str
    deleted: bool
    billing_account_id: str | None


@dataclass
class StripeEndpoint:
    """Our webhook endpoint at Stripe and its signing secret (Stripe shows a secret only when
    the endpoint is created, so it is kept here; the API verifies deliveries with it)."""

    id: str
    url: str
    secret: str
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class RegisteredEndpoint:
    """What registering our endpoint at the provider did: its id, its secret when it was
    created (``None``: an update of one whose secret we keep), and the endpoints of the same
    URL it replaced (deleted at the provider: their secrets are unknown here)."""

    id: str
    secret: str | None
    replaced: tuple[str, ...] = ()


COMMAND_ID_LENGTH = 64
"""The longest command id (``domain.messages.CommandId``)."""
GENERATION_DIGITS = 11
"""Room for a sync's generation (a Unix second, counted up) in its command id."""
GENERATIONS_AFTER_A_READ = 20
"""Generations tried after the one of an object's last read before counting from now."""

SYNC_NOT_YET_READ = frozenset({CommandStatus.QUEUED, CommandStatus.WAITING, CommandStatus.RETRYING})
"""A sync in these states reads its object from Stripe later (queued; waiting for a token of
the rate budget; due for another attempt, which reads again): an event that arrives now is
covered by that read, and joins it instead of asking for one of its own. Once a sync is
running, its read may be under way already: a later event takes the next generation."""

STRIPE_WEBHOOK_SENDER = "stripe:webhook"
"""Who the command log says sent a sync a webhook delivery recorded (its idempotency key is
the event's id, so a second delivery finds it). No API client can bear this id: HTTP Basic
ends a user id at its first colon."""

STRIPE_CLOCK_MARGIN = timedelta(seconds=60)
"""How far Stripe's clock (an event's ``created``, in whole seconds) and ours may disagree.
An event needs no read when one began at least this long after it was created."""


EVENT_CREATED_AHEAD_LIMIT = timedelta(seconds=600)
"""How far ahead of our clock an event's ``created`` may be: Stripe's signature tolerance
(300 s, either way) and as much again for its clock and ours to disagree. Stripe dates an
event when it makes it, before it signs a delivery, so one dated further ahead was not made
by Stripe as its clock stands (a body signed with a leaked secret, a clock gone wrong): it is
refused rather than recorded with a time no event can have yet."""


def created_too_far_ahead(event_created: datetime, now: datetime) -> bool:
    """Whether an event dated ``event_created`` is further ahead of ``now`` (our clock) than
    :data:`EVENT_CREATED_AHEAD_LIMIT` allows."""
    return event_created > now + EVENT_CREATED_AHEAD_LIMIT


def read_since(event_created: datetime, last_read: datetime | None) -> bool:
    """Whether a read of the object began after the event, for certain: then what the event
    reports is in our rows already (a late redelivery, a retry storm after an outage)."""
    if last_read is None:
        return False
    return event_created + timedelta(seconds=1) + STRIPE_CLOCK_MARGIN <= last_read


class SyncStripeObject(Command):
    """Re-read a Stripe object and bring our rows in line with it (a subscription: state,
    period, price → plan, ``cancel_at``; a customer: deleted or not). Recorded by the Stripe
    webhook endpoint, one command per read of an object (``command_ids_for``: the events that
    arrive while it waits join it; ``event_id`` and ``event_type`` name the first), and run
    by beat's sweep and operators. Published at the lowest priority, after bulk work."""

    TASK_NAME: ClassVar[str] = "stripe.sync_object"
    QUEUE: ClassVar[str] = "billing"
    PRIORITY: ClassVar[Priority] = Priority.BULK

    object_type: ObjectType
    object_id: ResourceId
    source: SyncSource = "webhook"
    event_id: str | None = Field(default=None, max_length=255)
    event_type: str | None = Field(default=None, max_length=255)

    @staticmethod
    def command_ids_for(
        object_type: ObjectType, object_id: str, last_read: datetime | None, now: datetime
    ) -> Iterator[str]:
        """The ids a sync of one object may take, in the order the webhook route tries them:
        ``stripe:{object_type}:{object_id}:{generation}``. Each id is one read of the object.
        The generation is the second the object's last read began (``last_read``; for one of
        ours never read, the second we began keeping it), so every event between two reads
        finds the sync waiting for the next one under the same id and joins it
        (:data:`SYNC_NOT_YET_READ`); an event that finds it started takes the next generation.
        An object not ours (``None``) counts from ``now``'s second, and so does one whose
        generations after its last read are all taken (syncs that failed). An object id too
        long for a command id is replaced by its hash."""
        name = f"{object_type}:{object_id}"
        if len(f"stripe:{name}:") + GENERATION_DIGITS > COMMAND_ID_LENGTH:
            name = f"{object_type}:{hashlib.sha256(object_id.encode()).hexdigest()[:24]}"
        if last_read is not None:
            first = int(last_read.timestamp())
            for generation in range(first, first + GENERATIONS_AFTER_A_READ):
                yield f"stripe:{name}:{generation}"
        generation = int(now.timestamp())
        while True:
            yield f"stripe:{name}:{generation}"
            generation += 1


class StripeObjectSynced(Result):
    """What the sync found: whether the object is ours, what changed (``field`` →
    ``[before, after]``), and the kinds of drift it corrected."""

    object_type: str
    object_id: str
    ours: bool
    changes: dict[str, list[Any]] = Field(default_factory=dict)
    drift: list[str] = Field(default_factory=list)
