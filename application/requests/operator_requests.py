"""What an operator (the CLI, the API's webhook routes, ``up``'s demo data) asks of the
application, as messages.

An operator action is a business operation like a queued command: one handler in
``tasks/handlers``, called ``handler(message, ctx)``. Unlike a command it runs at once, in the
caller's process, and is never journalled; its message never travels, so it is a plain
frozen dataclass, not part of the queue's contract. The handler checks what it is given
(a bad value is an ``InvalidArgument`` naming the field), as it did before these messages.

Actions that take an operator's description of a new thing take that description itself:
``NewOrganization``, ``NewUser`` (domain/billing/organizations.py, domain/users.py),
``CustomerLink`` and ``SubscriptionRecord`` (domain/drift/report.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from domain.drift.report import Finding
from domain.provider.sync import ObjectType, SyncSource
from domain.subscriptions.plans import PlanSpec
from domain.subscriptions.subscription import SubscriptionTerms
from domain.webhooks import DeliveryState

# Plans


@dataclass(frozen=True)
class CreatePlan:
    """Create a plan with its product and price at the provider; ``plan_id`` (default: a
    new ``plan_…`` id) names it."""

    spec: PlanSpec
    plan_id: str | None = None


@dataclass(frozen=True)
class ListPlans:
    """Every plan, by name."""


# Subscriptions


@dataclass(frozen=True)
class CreateSubscription:
    """Subscribe a registered billing account to a plan (its id or name). A
    ``subscription_id`` given again retries a creation that failed midway."""

    org_id: str
    billing_account_id: str
    plan_ref: str
    terms: SubscriptionTerms | None = None
    subscription_id: str | None = None


@dataclass(frozen=True)
class SeedPeriodEndChanges:
    """Subscribe the account ``count`` times to ``plan_ref``, each subscription with a
    change to ``target_plan_ref`` at its period's end (the period-end burst, for a local
    stack), on ``threads`` threads."""

    org_id: str
    billing_account_id: str
    plan_ref: str
    target_plan_ref: str
    count: int
    threads: int = 4


@dataclass(frozen=True)
class ReportSubscription:
    """A subscription with its plan and its changes."""

    subscription_id: str


# Stripe


@dataclass(frozen=True)
class ResyncStripeObject:
    """Re-read a Stripe object now and bring our rows in line, outside the queue (an
    operator, beat's reconciliation, and the queued ``SyncStripeObject`` it runs through)."""

    object_type: ObjectType
    object_id: str
    source: SyncSource
    event_id: str | None = None
    command_id: str | None = None


@dataclass(frozen=True)
class FindDrift:
    """The finding of the drift report read now that ``key`` names (``Finding.key``)."""

    key: str


@dataclass(frozen=True)
class RegisterStripeEndpoint:
    """Create (or update) our webhook endpoint for ``url`` at Stripe, and keep its secret."""

    url: str


@dataclass(frozen=True)
class ListStripeEndpointSecrets:
    """The secrets of our endpoints at Stripe, newest first."""


@dataclass(frozen=True)
class ReportDrift:
    """Every difference between Stripe and the database (changes nothing)."""

    read_invoices: bool = True
    """Whether the money check reads each subscription's latest invoices (one read each)."""


@dataclass(frozen=True)
class AdoptFindings:
    """Adopt each of the drift report's findings that can be adopted safely."""

    findings: Sequence[Finding]


# Webhook endpoints and their deliveries


@dataclass(frozen=True)
class AddEndpoint:
    """Add an enabled endpoint for ``events`` (catalog types; none, or ``*``: every event);
    a URL naming a host that is not public only with ``allow_private_networks``."""

    url: str
    events: Sequence[str] = ()
    description: str = ""
    allow_private_networks: bool = False


@dataclass(frozen=True)
class ListEndpoints:
    """Every webhook endpoint, oldest first."""


@dataclass(frozen=True)
class GetEndpoint:
    endpoint_id: str


@dataclass(frozen=True)
class DisableEndpoint:
    """Disable the endpoint and fail its unfinished deliveries (replayable), saying why."""

    endpoint_id: str
    reason: str = ""


@dataclass(frozen=True)
class EnableEndpoint:
    endpoint_id: str


@dataclass(frozen=True)
class RotateSecret:
    """Give the endpoint a new secret; the current one keeps signing for ``grace``."""

    endpoint_id: str
    grace: timedelta


@dataclass(frozen=True)
class ListDeliveries:
    """Deliveries, newest first, filtered by state (``failed_only``: failed), endpoint and
    event; at most ``limit``."""

    failed_only: bool = False
    state: DeliveryState | None = None
    endpoint_id: str | None = None
    event_id: str | None = None
    limit: int = 100


@dataclass(frozen=True)
class ReplayDeliveries:
    """Make each of these failed deliveries pending again (all or none)."""

    delivery_ids: Sequence[str]


REPLAY_BATCH = 500
"""Deliveries one transaction of :class:`ReplayFailed` replays."""


@dataclass(frozen=True)
class ReplayFailed:
    """Replay every failed delivery of the endpoint, ``batch_size`` per transaction."""

    endpoint_id: str
    batch_size: int = REPLAY_BATCH
