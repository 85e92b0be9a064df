"""Ports of persistence: the repositories of the aggregates (users, organizations, billing
accounts, plans, subscriptions, scheduled plan changes) and the unit of work that holds them,
as Protocols.

A handler reaches the aggregates only through a unit of work (one database transaction), so
that what it changes is committed or rolled back as one; the outbox and the webhook tables
are in that transaction too, their ports in ``domain.ports.events``. Adapters in ``worker/``
implement them (``adapters/db/uow.py``, ``adapters/db/repositories.py``).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import TracebackType
from typing import Protocol, Self

from domain.billing.accounts import BillingAccount
from domain.billing.organizations import Organization
from domain.operations.audit import AuditTrail
from domain.ports.events import (
    EventOutbox,
    StripeEndpointRepository,
    WebhookDeliveryRepository,
    WebhookEndpointRepository,
)
from domain.provider.pages import ProviderWalk, WalkedList
from domain.subscriptions.change_previews import IssuedPreview
from domain.subscriptions.plans import Plan
from domain.subscriptions.renewal_checks import RenewalCheck
from domain.subscriptions.scheduled_changes import ScheduledChange
from domain.subscriptions.subscription import Subscription
from domain.users import User


class UserRepository(Protocol):
    def get(self, user_id: str, *, for_update: bool = False) -> User | None: ...

    def by_email(self, email: str) -> User | None: ...

    def add(self, user: User) -> None: ...

    def save(self, user: User) -> None: ...


class OrganizationRepository(Protocol):
    def get(self, org_id: str) -> Organization | None: ...

    def by_name(self, name: str) -> Organization | None: ...

    def add(self, organization: Organization) -> None: ...


class OrganizationDirectory(Protocol):
    """Whether an organization exists, read outside any unit of work: what the API asks
    before it records (or counts) a command naming one."""

    def exists(self, org_id: str) -> bool: ...


class BillingAccountRepository(Protocol):
    def get(self, account_id: str, *, for_update: bool = False) -> BillingAccount | None: ...

    def current_for_organization(self, org_id: str) -> BillingAccount | None:
        """The organization's account that counts as its own (``pending`` or ``active``), if
        any: a disabled or deleted one does not."""
        ...

    def add(self, account: BillingAccount) -> None: ...

    def save(self, account: BillingAccount) -> None: ...

    def remove(self, account_id: str) -> None: ...

    def by_provider_id(
        self, provider_id: str, *, for_update: bool = False
    ) -> BillingAccount | None: ...

    def by_provider_ids(self, provider_ids: Collection[str]) -> list[BillingAccount]:
        """The accounts linked to these customers (one query: a page of the provider's
        list compared in bulk)."""
        ...

    def mark_synced(self, account_ids: Collection[str], read_at: datetime) -> None:
        """Record that these accounts' customers were read, as they are here, in a read that
        began at ``read_at`` (a later read already recorded is kept)."""
        ...

    def not_read_since(self, since: datetime, limit: int) -> list[str]:
        """Ids of up to ``limit`` registered accounts whose customer is not known deleted,
        opened by ``since`` and not read from the provider since (never read first, then
        read longest ago): those a pass over the provider's list begun at ``since`` did not
        show."""
        ...

    def list_all(self) -> list[BillingAccount]:
        """Every account, whatever its state (the drift report), by id."""
        ...

    def pending_created_before(self, before: datetime, limit: int) -> list[BillingAccount]:
        """Up to ``limit`` accounts still ``pending`` that were opened at or before
        ``before``, oldest first (beat's re-drive of stuck registrations)."""
        ...


class PlanRepository(Protocol):
    def get(self, plan_id: str) -> Plan | None: ...

    def by_name(self, name: str) -> Plan | None: ...

    def find(self, id_or_name: str) -> Plan | None:
        """The plan with this id, else the plan with this name."""
        ...

    def list(self) -> list[Plan]: ...

    def by_provider_price(self, price_id: str) -> Plan | None: ...

    def add(self, plan: Plan) -> None: ...

    def save(self, plan: Plan) -> None: ...


class SubscriptionRepository(Protocol):
    def get(self, subscription_id: str, *, for_update: bool = False) -> Subscription | None: ...

    def by_provider_id(
        self, provider_id: str, *, for_update: bool = False
    ) -> Subscription | None: ...

    def of_account(self, billing_account_id: str) -> list[Subscription]: ...

    def by_provider_ids(self, provider_ids: Collection[str]) -> list[Subscription]:
        """The subscriptions of these provider ids (one query: a page of the provider's
        list compared in bulk)."""
        ...

    def mark_synced(self, subscription_ids: Collection[str], read_at: datetime) -> None:
        """Record that these subscriptions were read from the provider, as they are here, in
        a read that began at ``read_at`` (a later read already recorded is kept)."""
        ...

    def not_read_since(self, since: datetime, limit: int) -> list[str]:
        """Ids of up to ``limit`` subscriptions that are not over, recorded by ``since`` and
        not read from the provider since (never read first, then read longest ago): those a
        pass over the provider's list begun at ``since`` did not show."""
        ...

    def add(self, subscription: Subscription) -> None: ...

    def save(self, subscription: Subscription) -> None: ...

    def list_all(self) -> list[Subscription]:
        """Every subscription, whatever its state (the drift report), by id."""
        ...


@dataclass(frozen=True)
class Claim:
    """A change a sweep took to apply: its id and the claim's number (a fencing token)."""

    change_id: str
    number: int


class ScheduledChangeRepository(Protocol):
    def get(self, change_id: str, *, for_update: bool = False) -> ScheduledChange | None: ...

    def subscription_of(self, change_id: str) -> str | None:
        """The id of the change's subscription (``None``: no such change), read alone: what
        a run needs to lock the subscription before the change, in the order every request
        locks them."""
        ...

    def pending_for(
        self, subscription_id: str, *, for_update: bool = False
    ) -> ScheduledChange | None:
        """The subscription's ``scheduled`` or ``applying`` change (there is at most one)."""
        ...

    def for_subscription(self, subscription_id: str) -> list[ScheduledChange]:
        """Every change of the subscription, newest first."""
        ...

    def add(self, change: ScheduledChange) -> None: ...

    def save(self, change: ScheduledChange) -> None: ...

    def claim_due(
        self, now: datetime, lease_until: datetime, limit: int, *, lead: timedelta
    ) -> list[Claim]:
        """Atomically take up to ``limit`` changes that are ``scheduled`` and due (a change
        at the period's end ``lead`` before its boundary), or ``applying`` with an expired
        lease: each becomes ``applying`` until ``lease_until`` with its claim count raised.
        Two sweeps never take the same change."""
        ...

    def staged_due(self, now: datetime, limit: int) -> list[str]:
        """The ids of up to ``limit`` ``staged`` changes whose boundary passed, oldest
        first, none of them being withdrawn (``ScheduledChange.is_withdrawing``)."""
        ...

    def withdrawals_given_up(self, now: datetime, limit: int) -> list[ScheduledChange]:
        """Up to ``limit`` ``staged`` changes whose withdrawal's lease ran out before ``now``
        (``ScheduledChange.withdrawal_given_up``), oldest boundary first."""
        ...

    def release(self, claim: Claim, now: datetime) -> None:
        """Let the next sweep take the change again (its lease ends now)."""
        ...

    def claimed_since(self, since: datetime, lease: timedelta, limit: int) -> list[Claim]:
        """The claims of the changes claimed (``applying`` under a lease of ``lease``) at
        ``since`` or later and not applied yet, oldest first: their apply commands may have
        been dropped by a broker failover."""
        ...

    def count_in_flight(self, now: datetime) -> int:
        """Changes being applied under a lease that still runs (claimed, not yet done)."""
        ...

    def all_pending(self) -> list[ScheduledChange]:
        """Every ``scheduled``, ``applying`` or ``staged`` change (the drift report)."""
        ...


class ChangePreviewRepository(Protocol):
    """The previews answered lately (``domain/subscriptions/change_previews.py``)."""

    def get(self, preview_id: str) -> IssuedPreview | None: ...

    def add(self, preview: IssuedPreview) -> None: ...

    def prune(self, subscription_id: str, before: datetime) -> None:
        """Forget the subscription's previews whose ``proration_date`` is before ``before``
        (expired: no change may name them any more)."""
        ...


class RenewalCheckRepository(Protocol):
    """The checks of renewals plan changes took effect at
    (``domain/subscriptions/renewal_checks.py``)."""

    def get(self, change_id: str, *, for_update: bool = False) -> RenewalCheck | None: ...

    def add(self, check: RenewalCheck) -> None: ...

    def save(self, check: RenewalCheck) -> None: ...

    def due(self, now: datetime, limit: int) -> list[RenewalCheck]:
        """Up to ``limit`` checks due by ``now`` (``due`` or ``billed_wrong``), the earliest
        due first."""
        ...


class ProviderWalkRepository(Protocol):
    """Where the reconciliation sweep stands in each of the provider's lists."""

    def get(self, walk_id: WalkedList, *, for_update: bool = False) -> ProviderWalk | None: ...

    def save(self, walk: ProviderWalk) -> None: ...


class UnitOfWork(Protocol):
    """One database transaction. Leaving the block without ``commit()`` rolls back.

    ``commit()`` raises :class:`domain.errors.UniquenessViolation` when the transaction would
    break a uniqueness rule (a racing transaction got there first).
    """

    @property
    def users(self) -> UserRepository: ...

    @property
    def organizations(self) -> OrganizationRepository: ...

    @property
    def billing_accounts(self) -> BillingAccountRepository: ...

    @property
    def plans(self) -> PlanRepository: ...

    @property
    def subscriptions(self) -> SubscriptionRepository: ...

    @property
    def scheduled_changes(self) -> ScheduledChangeRepository: ...

    @property
    def change_previews(self) -> ChangePreviewRepository: ...

    @property
    def renewal_checks(self) -> RenewalCheckRepository: ...

    @property
    def events(self) -> EventOutbox: ...

    @property
    def webhook_endpoints(self) -> WebhookEndpointRepository: ...

    @property
    def webhook_deliveries(self) -> WebhookDeliveryRepository: ...

    @property
    def stripe_endpoints(self) -> StripeEndpointRepository: ...

    @property
    def provider_walks(self) -> ProviderWalkRepository: ...

    @property
    def audit(self) -> AuditTrail:
        """The operators' audit trail (``domain.operations.audit``)."""
        ...

    def __enter__(self) -> Self: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...

    def commit(self) -> None: ...

    def rollback(self) -> None: ...
