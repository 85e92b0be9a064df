"""Drift between the billing provider and our database (issue 21): what Stripe has that we do
not, what we have that Stripe does not, and where the two disagree; which of it can be
adopted safely, and what needs a person.

Pure rules: the handler (``tasks/handlers/drift.py``) reads both sides, every customer and
every subscription at the provider (lists, which see every write at once: Stripe's search
index lags writes by up to a minute) and our accounts, subscriptions, plans and pending plan
changes, and hands them to :func:`find_drift`.

What is *not* drift:

* a customer or subscription without our metadata that no account of ours is linked to is
  still reported (an orphan), but a customer without metadata linked to one of our accounts is
  ours;
* a subscription whose price at the provider is the target of its pending plan change (made at
  the provider ahead of its boundary, or being applied now) is in flight, not mismatched;
* a subscription the provider renewed since we last wrote its row (our period is an earlier
  period of the provider's billing cycle, and a trial that ended since is ``active`` there) is
  behind, as every row is between two plan changes: the handlers read the period from the
  provider before they rely on it.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from domain.billing import BillingAccount, BillingAccountState
from domain.billing_periods import period_end_after
from domain.messages import is_id
from domain.plans import Plan
from domain.scheduled_changes import ScheduledChange
from domain.subscriptions import ProviderSubscription, Subscription, SubscriptionState

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
    was made and its metadata (ours carry our ids: see ``tasks/handlers/subscribe.py``)."""

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

    @property
    def adoptable(self) -> bool:
        return self.adoption is not None

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
        }


@dataclass(frozen=True)
class OurSide:
    """What the database holds: every account, subscription and plan, and the pending plan
    changes (scheduled, applying or staged)."""

    accounts: Sequence[BillingAccount]
    subscriptions: Sequence[Subscription]
    plans: Sequence[Plan]
    pending_changes: Sequence[ScheduledChange] = ()


@dataclass(frozen=True)
class ProviderSide:
    """What the provider lists: every customer, and every subscription whatever its status."""

    customers: Sequence[RemoteCustomer]
    subscriptions: Sequence[RemoteSubscription]


def find_drift(ours: OurSide, theirs: ProviderSide) -> list[Finding]:
    """Every difference, customers first, then subscriptions, each in a stable order."""
    return [*_customer_drift(ours, theirs), *_subscription_drift(ours, theirs)]


_NO_CUSTOMER_MEANT = (
    "if it was made for an account that was removed or never committed, delete it at Stripe "
    "(first check it has no subscriptions, invoices or payments)"
)


def _customer_drift(ours: OurSide, theirs: ProviderSide) -> list[Finding]:
    accounts = {account.id: account for account in ours.accounts}
    linked = {account.provider_id: account for account in ours.accounts if account.provider_id}
    naming: dict[str, list[RemoteCustomer]] = defaultdict(list)
    for customer in theirs.customers:
        if customer.billing_account_id is not None:
            naming[customer.billing_account_id].append(customer)
    findings: list[Finding] = []
    for account_id in sorted(naming):
        named = sorted(naming[account_id], key=lambda customer: (customer.created, customer.id))
        account = accounts.get(account_id)
        if account is not None and len(named) > 1:
            findings.append(_duplicates(account, named))
            continue
        for customer in named:
            finding = _named_customer(customer, account, linked.get(customer.id))
            if finding is not None:
                findings.append(finding)
    customer_ids = {customer.id for customer in theirs.customers}
    for account in sorted(ours.accounts, key=lambda account: account.id):
        if (
            account.provider_id is not None
            and account.provider_id not in customer_ids
            and account.state is not BillingAccountState.DISABLED
        ):
            findings.append(
                Finding(
                    DriftKind.MISSING_CUSTOMER,
                    f"billing account {account.id} is linked to customer {account.provider_id}, "
                    "which Stripe does not have (deleted there?)",
                    "find out who deleted it (Stripe dashboard: Developers > Events); the "
                    "account cannot be billed until it has a customer again",
                    billing_account_id=account.id,
                    customer_ids=(account.provider_id,),
                )
            )
    return findings


def _duplicates(account: BillingAccount, named: list[RemoteCustomer]) -> Finding:
    ids = tuple(customer.id for customer in named)
    keep = account.provider_id if account.provider_id in ids else named[0].id
    why = "the one the account is linked to" if keep == account.provider_id else "the oldest"
    return Finding(
        DriftKind.DUPLICATE_CUSTOMERS,
        f"{len(named)} customers name billing account {account.id}: {', '.join(ids)}",
        f"keep {keep} ({why}: registration takes the oldest); move any subscription, payment "
        "method or balance of the others to it, then delete the others at Stripe",
        billing_account_id=account.id,
        customer_ids=ids,
    )


def _named_customer(
    customer: RemoteCustomer, account: BillingAccount | None, linked_to: BillingAccount | None
) -> Finding | None:
    """The finding about the only customer naming ``account`` (``None``: we do not have it)."""
    named_id = customer.billing_account_id
    if linked_to is not None:
        if linked_to.id == named_id:
            return None
        return Finding(
            DriftKind.CUSTOMER_MISMATCH,
            f"customer {customer.id} names billing account {named_id} but billing account "
            f"{linked_to.id} is linked to it",
            "find out which account it belongs to; correct its metadata at Stripe "
            "(billing_account_id) or the account's link",
            billing_account_id=linked_to.id,
            customer_ids=(customer.id,),
        )
    if account is None:
        return Finding(
            DriftKind.ORPHAN_CUSTOMER,
            f"customer {customer.id} names billing account {named_id}, which we do not have",
            _NO_CUSTOMER_MEANT,
            billing_account_id=named_id,
            customer_ids=(customer.id,),
        )
    if account.provider_id is not None:
        return Finding(
            DriftKind.CUSTOMER_MISMATCH,
            f"customer {customer.id} names billing account {account.id}, which is linked to "
            f"customer {account.provider_id}",
            f"keep {account.provider_id} (the account's); move anything on {customer.id} to "
            "it, then delete it at Stripe",
            billing_account_id=account.id,
            customer_ids=(customer.id, account.provider_id),
        )
    if account.state is BillingAccountState.DISABLED:
        return Finding(
            DriftKind.ORPHAN_CUSTOMER,
            f"customer {customer.id} names billing account {account.id}, which is disabled and "
            "has no customer",
            _NO_CUSTOMER_MEANT,
            billing_account_id=account.id,
            customer_ids=(customer.id,),
        )
    return Finding(
        DriftKind.ORPHAN_CUSTOMER,
        f"customer {customer.id} names billing account {account.id} ({account.state.value}), "
        "which has no customer: its registration stopped after Stripe made it",
        f"adopt: register billing account {account.id} with customer {customer.id}",
        billing_account_id=account.id,
        customer_ids=(customer.id,),
        adoption=CustomerLink(account.id, customer.id),
    )


def _subscription_drift(ours: OurSide, theirs: ProviderSide) -> list[Finding]:
    rows_by_provider_id = {row.provider_id: row for row in ours.subscriptions}
    remote_by_id = {remote.id: remote for remote in theirs.subscriptions}
    orphans = sorted(
        (remote for remote in theirs.subscriptions if remote.id not in rows_by_provider_id),
        key=lambda remote: (remote.created, remote.id),
    )
    context = _Context.of(ours, orphans)
    findings = [_orphan_subscription(remote, context) for remote in orphans]
    for row in sorted(ours.subscriptions, key=lambda row: row.id):
        remote = remote_by_id.get(row.provider_id)
        if remote is None:
            findings.append(
                Finding(
                    DriftKind.MISSING_SUBSCRIPTION,
                    f"subscription {row.id} ({row.state.value}) is linked to Stripe "
                    f"subscription {row.provider_id}, which Stripe does not have",
                    "find out what happened to it at Stripe (dashboard: Developers > Events); "
                    "if the customer is still meant to be billed, subscribe the account again",
                    billing_account_id=row.billing_account_id,
                    subscription_id=row.id,
                    provider_subscription_id=row.provider_id,
                )
            )
            continue
        findings.extend(_pair_drift(row, remote.subscription, context))
    return findings


@dataclass(frozen=True)
class _Context:
    rows_by_id: Mapping[str, Subscription]
    accounts_by_customer: Mapping[str, BillingAccount]
    plans_by_id: Mapping[str, Plan]
    plans_by_price: Mapping[str, Plan]
    pending_by_subscription: Mapping[str, ScheduledChange]
    orphans_naming: Counter[str]

    @classmethod
    def of(cls, ours: OurSide, orphans: Sequence[RemoteSubscription]) -> _Context:
        return cls(
            rows_by_id={row.id: row for row in ours.subscriptions},
            accounts_by_customer={
                account.provider_id: account for account in ours.accounts if account.provider_id
            },
            plans_by_id={plan.id: plan for plan in ours.plans},
            plans_by_price={
                plan.provider_price_id: plan for plan in ours.plans if plan.provider_price_id
            },
            pending_by_subscription={
                change.subscription_id: change for change in ours.pending_changes
            },
            orphans_naming=Counter(
                remote.subscription_id for remote in orphans if remote.subscription_id
            ),
        )


def _orphan_subscription(remote: RemoteSubscription, context: _Context) -> Finding:
    named = remote.subscription_id
    account = context.accounts_by_customer.get(remote.customer_id)
    plan = context.plans_by_price.get(remote.subscription.price_id)
    status = remote.subscription.status
    described = (
        f"Stripe subscription {remote.id} ({status}) of customer {remote.customer_id} has no "
        "row here"
    )

    def needs_a_person(why: str, action: str, subscription_id: str | None = named) -> Finding:
        return Finding(
            DriftKind.ORPHAN_SUBSCRIPTION,
            f"{described}: {why}",
            action,
            billing_account_id=account.id if account is not None else None,
            customer_ids=(remote.customer_id,),
            subscription_id=subscription_id,
            provider_subscription_id=remote.id,
        )

    cancel_it = "if nobody meant it, cancel it at Stripe; else record it by hand"
    if named is None:
        return needs_a_person("its metadata names no subscription of ours", cancel_it)
    existing = context.rows_by_id.get(named)
    if existing is not None:
        return needs_a_person(
            f"it names our subscription {named}, which is linked to {existing.provider_id}",
            f"one of the two bills the customer twice: cancel the one that should not bill "
            f"at Stripe (our row stays on {existing.provider_id})",
        )
    if context.orphans_naming[named] > 1:
        return needs_a_person(
            f"{context.orphans_naming[named]} Stripe subscriptions name subscription {named}",
            "cancel all but one at Stripe, then adopt that one (`stripe drift --adopt`)",
        )
    if account is None:
        return needs_a_person(
            "its customer is not linked to any billing account of ours",
            "link the customer first (an orphan_customer, adopted), or cancel it at Stripe",
        )
    metadata_account = remote.metadata.get(ACCOUNT_KEY)
    metadata_org = remote.metadata.get(ORG_KEY)
    if (metadata_account and metadata_account != account.id) or (
        metadata_org and metadata_org != account.org_id
    ):
        return needs_a_person(
            f"its metadata names billing account {metadata_account} of {metadata_org}, its "
            f"customer is billing account {account.id}'s",
            "find out which account it belongs to; cancel it at Stripe if it is nobody's",
        )
    if account.state is BillingAccountState.DISABLED:
        return needs_a_person(
            f"its billing account {account.id} is disabled", "cancel it at Stripe if it bills"
        )
    if plan is None:
        return needs_a_person(
            f"its price {remote.subscription.price_id} is none of our plans'",
            "change it to one of our plans' prices at Stripe, then adopt it; or cancel it",
        )
    subscription_id = named if is_id(named) else None
    recorded_as = subscription_id or "a new id (its metadata's is not a valid id)"
    return Finding(
        DriftKind.ORPHAN_SUBSCRIPTION,
        f"{described}: a creation of subscription {named} stopped after Stripe made it",
        f"adopt: record it as subscription {recorded_as} of billing account {account.id} on "
        f"plan {plan.name}",
        billing_account_id=account.id,
        customer_ids=(remote.customer_id,),
        subscription_id=named,
        provider_subscription_id=remote.id,
        adoption=SubscriptionRecord(subscription_id, account.id, plan.id, remote),
    )


def _pair_drift(
    row: Subscription, remote: ProviderSubscription, context: _Context
) -> list[Finding]:
    def finding(kind: DriftKind, description: str, action: str) -> Finding:
        return Finding(
            kind,
            f"subscription {row.id} ({remote.id}): {description}",
            action,
            billing_account_id=row.billing_account_id,
            subscription_id=row.id,
            provider_subscription_id=remote.id,
        )

    findings: list[Finding] = []
    plan = context.plans_by_id.get(row.plan_id)
    expected_price = plan.provider_price_id if plan is not None else None
    if remote.price_id != expected_price and not _in_flight(row, remote, context):
        billed = context.plans_by_price.get(remote.price_id)
        billed_as = f"plan {billed.name}'s" if billed is not None else "none of our plans'"
        findings.append(
            finding(
                DriftKind.PLAN_MISMATCH,
                f"on plan {plan.name if plan else row.plan_id} here ({expected_price}), Stripe "
                f"bills {remote.price_id} ({billed_as} price)",
                "find out who changed the price at Stripe; change it back there, or change the "
                "subscription's plan here to the one Stripe bills",
            )
        )
    behind = _renewed_since(row, remote)
    if (row.current_period_start, row.current_period_end) != (
        remote.current_period_start,
        remote.current_period_end,
    ) and not behind:
        findings.append(
            finding(
                DriftKind.PERIOD_MISMATCH,
                f"period {row.current_period_start.isoformat()} → "
                f"{row.current_period_end.isoformat()} here, Stripe's is "
                f"{remote.current_period_start.isoformat()} → "
                f"{remote.current_period_end.isoformat()} on another billing cycle",
                "find out who moved the billing cycle at Stripe (anchor reset, trial change); "
                "plan changes at the period's end follow Stripe's period",
            )
        )
    trial_ended = (
        behind
        and row.state is SubscriptionState.TRIALING
        and remote.state is SubscriptionState.ACTIVE
    )
    if remote.state is not row.state and not trial_ended:
        findings.append(
            finding(
                DriftKind.STATE_MISMATCH,
                f"{row.state.value} here, {remote.status} at Stripe",
                "Stripe's state is the one that bills: check the customer's invoices and "
                "payments at Stripe; a plan change reads Stripe's state and corrects the row",
            )
        )
    return findings


def _in_flight(row: Subscription, remote: ProviderSubscription, context: _Context) -> bool:
    """Whether the provider's price is the target of the row's pending plan change."""
    change = context.pending_by_subscription.get(row.id)
    target = context.plans_by_id.get(change.target_plan_id) if change is not None else None
    return target is not None and target.provider_price_id == remote.price_id


def _renewed_since(row: Subscription, remote: ProviderSubscription) -> bool:
    """Whether the provider only renewed the subscription since the row was written: the
    row's period ended by the provider's current one's start, at a boundary of its cycle."""
    if row.current_period_end > remote.current_period_start:
        return False
    anchor = remote.billing_cycle_anchor or remote.current_period_start
    try:
        boundary = period_end_after(
            anchor, remote.interval, remote.interval_count, row.current_period_start
        )
    except ValueError:
        return False
    return boundary == row.current_period_end
