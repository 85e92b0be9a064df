"""Drift between the billing provider and our database (issue 21): what Stripe has that we do
not, what we have that Stripe does not, and where the two disagree; which of it can be
adopted safely, and what needs a person.

What the rules read and what they find: each side as it is read (``OurSide``,
``ProviderSide``: the provider's customers and subscriptions with their metadata), and a
``Finding`` with the adoption it allows. The rules are ``domain.drift.customers`` and
``domain.drift.subscriptions``, which ``domain.drift.rules`` composes. A registration and a
creation read the same values for what an earlier attempt of theirs made at the provider
(``oldest_customer``, ``existing_subscription``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from domain.billing.accounts import BillingAccount
from domain.billing.currencies import format_amount
from domain.subscriptions.plans import Plan
from domain.subscriptions.renewals import BilledInvoice
from domain.subscriptions.scheduled_changes import ScheduledChange
from domain.subscriptions.subscription import ProviderSubscription, Subscription

ACCOUNT_KEY = "billing_account_id"
"""The metadata key naming our billing account, on a customer and on a subscription."""
SUBSCRIPTION_KEY = "subscription_id"
"""The metadata key naming our subscription, on a subscription."""
ORG_KEY = "org_id"


class DriftKind(StrEnum):
    ORPHAN_CUSTOMER = "orphan_customer"
    """A customer no account of ours is linked to that names one of ours we do not have, or
    one that has no customer yet (a registration that died after the provider answered)."""
    CUSTOMER_MISMATCH = "customer_mismatch"
    """A customer names an account that is linked to another customer."""
    DUPLICATE_CUSTOMERS = "duplicate_customers"
    """Several customers name one account."""
    MISSING_CUSTOMER = "missing_customer"
    """An account's customer is not at the provider (deleted there)."""
    ORPHAN_SUBSCRIPTION = "orphan_subscription"
    """A subscription at the provider without a row here."""
    MISSING_SUBSCRIPTION = "missing_subscription"
    """A row whose subscription is not at the provider."""
    PLAN_MISMATCH = "plan_mismatch"
    """The provider bills another price than the row's plan's."""
    PERIOD_MISMATCH = "period_mismatch"
    """The provider's current period is not on the row's billing cycle."""
    STATE_MISMATCH = "state_mismatch"
    """The provider's state is not the row's (beyond a trial that ended since)."""
    RENEWAL_MISMATCH = "renewal_mismatch"
    """The latest renewal invoice billed another price or amount than the plan our rows had
    in force at that period's start (and no correction nets it to that plan's)."""
    SCHEDULE_AT_STRIPE = "schedule_at_stripe"
    """A subscription schedule at the provider (made in Stripe's dashboard) manages the
    subscription: its phases set the price at their boundaries over our plan changes, which
    are refused (or skipped) meanwhile."""
    CREDITED_AT_STRIPE = "credited_at_stripe"
    """Credit notes at the provider gave back part of the latest renewal (issued in Stripe's
    dashboard, never by us): the period cost the customer less than its plan."""
    DISCOUNT_AT_STRIPE = "discount_at_stripe"
    """Stripe takes a discount off the subscription's price (a coupon on it now, or on its
    latest renewal), which we never apply: the customer pays less than the plan says."""


@dataclass(frozen=True)
class PriceTerms:
    """What a price bills: an amount in minor units per interval (``None`` where unknown)."""

    price_id: str | None
    amount: int | None
    currency: str | None
    interval: str | None = None
    interval_count: int = 1

    @classmethod
    def of_plan(cls, plan: Plan) -> PriceTerms:
        return cls(plan.provider_price_id, plan.amount, plan.currency, plan.interval.value)

    def shown(self) -> str:
        """``15.00 USD/month (price_…)``."""
        amount = (
            format_amount(self.amount, self.currency)
            if self.amount is not None and self.currency
            else "an unknown amount"
        )
        every = (
            ""
            if self.interval is None
            else f"/{self.interval}"
            if self.interval_count == 1
            else f"/{self.interval_count} {self.interval}s"
        )
        return f"{amount}{every} ({self.price_id or 'no price'})"

    def to_view(self) -> dict[str, Any]:
        return {
            "price_id": self.price_id,
            "amount": self.amount,
            "currency": self.currency,
            "interval": self.interval,
            "interval_count": self.interval_count,
        }


@dataclass(frozen=True)
class RemoteCustomer:
    """A customer as the provider lists it."""

    id: str
    created: datetime
    metadata: Mapping[str, str] = field(default_factory=dict)

    @property
    def billing_account_id(self) -> str | None:
        return self.metadata.get(ACCOUNT_KEY) or None


@dataclass(frozen=True)
class RemoteSubscription:
    """A subscription as the provider lists it: our view of it, with its customer, when it
    was made and its metadata (ours carry our ids: see
    ``application/handlers/subscriptions/subscribe.py``)."""

    subscription: ProviderSubscription
    customer_id: str
    created: datetime
    metadata: Mapping[str, str] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return self.subscription.id

    @property
    def subscription_id(self) -> str | None:
        """Our subscription's id, as its metadata names it."""
        return self.metadata.get(SUBSCRIPTION_KEY) or None


def oldest_customer(customers: Sequence[RemoteCustomer]) -> RemoteCustomer | None:
    """The customer a registration takes when several name its account: the oldest (then
    the smallest id), so that every attempt takes the same one."""
    return min(customers, key=lambda customer: (customer.created, customer.id), default=None)


def existing_subscription(
    listed: Sequence[RemoteSubscription], subscription_id: str
) -> RemoteSubscription | None:
    """The provider's subscription an earlier attempt to create ``subscription_id`` made:
    one whose metadata names it; a live one before one that is over, then the oldest."""
    named = [remote for remote in listed if remote.subscription_id == subscription_id]
    return min(
        named,
        key=lambda remote: (remote.subscription.state.is_over, remote.created, remote.id),
        default=None,
    )


@dataclass(frozen=True)
class CustomerLink:
    """Adoption: register the account with the customer, as a registration would have."""

    billing_account_id: str
    customer_id: str


@dataclass(frozen=True)
class SubscriptionRecord:
    """Adoption: record the provider's subscription as ours."""

    subscription_id: str | None
    """The id its metadata names; ``None``: it names no valid id, a new one is made."""
    billing_account_id: str
    plan_id: str
    remote: RemoteSubscription


Adoption = CustomerLink | SubscriptionRecord


@dataclass(frozen=True)
class Finding:
    """One difference between the provider and our database."""

    kind: DriftKind
    description: str
    """One line: what differs."""
    action: str
    """What adopting it does, or what a person should do."""
    billing_account_id: str | None = None
    customer_ids: tuple[str, ...] = ()
    subscription_id: str | None = None
    """Ours."""
    provider_subscription_id: str | None = None
    adoption: Adoption | None = None
    """What ``--adopt`` does; ``None``: it needs a person."""
    stripe_bills: PriceTerms | None = None
    """What the provider bills (a plan or renewal mismatch)."""
    we_bill: PriceTerms | None = None
    """What our rows say it should bill."""

    @property
    def adoptable(self) -> bool:
        return self.adoption is not None

    @property
    def key(self) -> str:
        """Its name for an operator's action: its kind and the ids it involves."""
        return ":".join((self.kind.value, *self.ids))

    @property
    def ids(self) -> tuple[str, ...]:
        """Every id involved: our account, the customers, our subscription, the provider's."""
        return tuple(
            value
            for value in (
                self.billing_account_id,
                *self.customer_ids,
                self.subscription_id,
                self.provider_subscription_id,
            )
            if value
        )

    def to_view(self) -> dict[str, Any]:
        """What ``stripe drift --json`` prints of it."""
        return {
            "kind": self.kind.value,
            "billing_account_id": self.billing_account_id,
            "customer_ids": list(self.customer_ids),
            "subscription_id": self.subscription_id,
            "provider_subscription_id": self.provider_subscription_id,
            "description": self.description,
            "adoptable": self.adoptable,
            "action": self.action,
            "stripe_bills": None if self.stripe_bills is None else self.stripe_bills.to_view(),
            "we_bill": None if self.we_bill is None else self.we_bill.to_view(),
        }


@dataclass(frozen=True)
class OurSide:
    """What the database holds: every account, subscription and plan, the pending plan
    changes (scheduled, applying or staged), and the changes made (applied), by which the
    money check knows the plan in force at a period's start."""

    accounts: Sequence[BillingAccount]
    subscriptions: Sequence[Subscription]
    plans: Sequence[Plan]
    pending_changes: Sequence[ScheduledChange] = ()
    applied_changes: Sequence[ScheduledChange] = ()


@dataclass(frozen=True)
class ProviderSide:
    """What the provider lists: every customer, every subscription whatever its status, and
    the latest invoices of each of our subscriptions (by the provider's subscription id; the
    money check's; empty when not read)."""

    customers: Sequence[RemoteCustomer]
    subscriptions: Sequence[RemoteSubscription]
    invoices: Mapping[str, Sequence[BilledInvoice]] = field(default_factory=dict)
