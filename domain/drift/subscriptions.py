"""The drift of subscriptions: one at the provider without a row here (adoptable as
``SubscriptionRecord`` when its metadata, customer and price make it unambiguous), a row whose
subscription the provider does not have, a pair that disagrees on the plan, the period or
the state, and a subscription a schedule at the provider manages.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from domain.billing.accounts import BillingAccount, BillingAccountState
from domain.drift.report import (
    ACCOUNT_KEY,
    ORG_KEY,
    DriftKind,
    Finding,
    OurSide,
    PriceTerms,
    ProviderSide,
    RemoteSubscription,
    SubscriptionRecord,
)
from domain.messages import is_id
from domain.subscriptions.billing_periods import period_end_after
from domain.subscriptions.plans import Plan
from domain.subscriptions.scheduled_changes import ScheduledChange
from domain.subscriptions.subscription import ProviderSubscription, Subscription, SubscriptionState


def subscription_drift(ours: OurSide, theirs: ProviderSide) -> list[Finding]:
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
    if account.state in (BillingAccountState.DISABLED, BillingAccountState.DELETED):
        return needs_a_person(
            f"its billing account {account.id} is {account.state.value}",
            "cancel it at Stripe if it bills",
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
    def finding(
        kind: DriftKind,
        description: str,
        action: str,
        stripe_bills: PriceTerms | None = None,
        we_bill: PriceTerms | None = None,
    ) -> Finding:
        return Finding(
            kind,
            f"subscription {row.id} ({remote.id}): {description}",
            action,
            billing_account_id=row.billing_account_id,
            subscription_id=row.id,
            provider_subscription_id=remote.id,
            stripe_bills=stripe_bills,
            we_bill=we_bill,
        )

    findings: list[Finding] = []
    plan = context.plans_by_id.get(row.plan_id)
    expected_price = plan.provider_price_id if plan is not None else None
    if remote.price_id != expected_price and not _in_flight(row, remote, context):
        billed = context.plans_by_price.get(remote.price_id)
        billed_as = f"plan {billed.name}'s" if billed is not None else "none of our plans'"
        stripe_bills = stripe_terms(remote, billed)
        we_bill = PriceTerms.of_plan(plan) if plan is not None else None
        ours_shown = we_bill.shown() if we_bill is not None else "a price we do not know"
        findings.append(
            finding(
                DriftKind.PLAN_MISMATCH,
                f"on plan {plan.name if plan else row.plan_id} here at {ours_shown}, Stripe "
                f"bills {stripe_bills.shown()} ({billed_as} price)",
                "find out who changed the price at Stripe; change it back there, or change the "
                "subscription's plan here to the one Stripe bills",
                stripe_bills,
                we_bill,
            )
        )
    if remote.schedule_id is not None:
        findings.append(
            finding(
                DriftKind.SCHEDULE_AT_STRIPE,
                f"Stripe's subscription schedule {remote.schedule_id} manages it: its phases "
                "set the price at their boundaries, over any plan change made here (refused "
                "meanwhile; a pending change at the period's end is skipped, never sent)",
                "if the schedule is meant, change the plan in its phases at Stripe; if not, "
                "release it at Stripe (the subscription's page: Schedule > Release), then "
                "change the plan here",
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


def stripe_terms(remote: ProviderSubscription, billed: Plan | None = None) -> PriceTerms:
    """What the provider's subscription bills, as its price says (where the provider did
    not say, as the plan of that price says)."""
    unknown = remote.unit_amount is None and billed is not None
    return PriceTerms(
        remote.price_id,
        billed.amount if unknown and billed is not None else remote.unit_amount,
        billed.currency if unknown and billed is not None else remote.currency,
        remote.interval,
        remote.interval_count,
    )
