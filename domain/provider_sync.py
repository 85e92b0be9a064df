"""Stripe's truth flowing in: its events, and how our rows follow what it holds.

Stripe tells us what happened through signed webhook events, delivered at least once and in
no guaranteed order. An event is only a hint: the handler re-reads the object it names from
Stripe and brings our rows in line with what Stripe holds *now*, so a duplicate is the same
command (keyed by the event id) and a stale event delivered last changes nothing. Beat's
reconciliation sweep re-reads the rows synced longest ago with the same handler, for when
webhooks are down, late or never configured.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar, Literal

from pydantic import Field

from domain.messages import Command, ResourceId, Result
from domain.rate_budget import Priority

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


class SyncStripeObject(Command):
    """Re-read a Stripe object and bring our rows in line with it (a subscription: state,
    period, price → plan, ``cancel_at``; a customer: deleted or not). Recorded by the Stripe
    webhook endpoint with the command id ``stripe:{event_id}``, and run by beat's sweep."""

    TASK_NAME: ClassVar[str] = "stripe.sync_object"
    QUEUE: ClassVar[str] = "billing"
    PRIORITY: ClassVar[Priority] = Priority.BULK

    object_type: ObjectType
    object_id: ResourceId
    source: SyncSource = "webhook"
    event_id: str | None = Field(default=None, max_length=255)
    event_type: str | None = Field(default=None, max_length=255)

    @staticmethod
    def command_id_for(event_id: str) -> str:
        """One command per Stripe event: a second delivery is the same command."""
        return f"stripe:{event_id}"


class StripeObjectSynced(Result):
    """What the sync found: whether the object is ours, what changed (``field`` →
    ``[before, after]``), and the kinds of drift it corrected."""

    object_type: str
    object_id: str
    ours: bool
    changes: dict[str, list[Any]] = Field(default_factory=dict)
    drift: list[str] = Field(default_factory=list)
