"""Money off at Stripe (issue 44): the discounts it takes and the credit notes it issued. A
coupon redeemed on one of our subscriptions at Stripe (its dashboard, a support agent, a
script with the key) makes the customer pay less than the plan's price, while the price, and
so every check of ids, stays the same. We never apply discounts ourselves, so each one is
someone's decision that an operator should know of.

A subscription is reported when Stripe has a discount on it now (the coupon's terms and what
it takes off the plan's price), or when its latest renewal was discounted (a ``once`` coupon
is gone from the subscription after the invoice it took from): what the period was billed and
what the discounts took. A renewal's discount is never a ``renewal_mismatch``: that check
compares the period's prices, before discounts (``domain/drift/renewals.py``).

Credit notes issued at Stripe on a subscription's latest renewal (a refund, a goodwill credit)
give part of the period back: reported as ``credited_at_stripe`` with what the period cost.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from domain.billing.currencies import format_amount
from domain.drift.renewals import IN_FORCE, plan_in_force
from domain.drift.report import DriftKind, Finding, OurSide, PriceTerms, ProviderSide
from domain.subscriptions.plans import Plan
from domain.subscriptions.renewals import BilledPeriod, latest_renewal
from domain.subscriptions.scheduled_changes import ScheduledChange
from domain.subscriptions.subscription import ProviderSubscription, Subscription

CREDIT_REMEDY = (
    "if someone meant it (a refund, a goodwill credit), nothing to do: it stays reported "
    "until the next renewal; if not, find out who issued it at Stripe (the invoice's page: "
    "Credit notes)"
)
DISCOUNT_REMEDY = (
    "if someone meant it (a goodwill discount, a deal), nothing to do: our plans keep list "
    "prices and our previews show what Stripe will invoice; if not, remove the discount at "
    "Stripe (the subscription's page: Remove discount) and find out who added it "
    "(dashboard: Developers > Events)"
)


def money_off_drift(ours: OurSide, theirs: ProviderSide) -> list[Finding]:
    """A finding per subscription of ours that Stripe discounts now, or whose latest renewal
    it discounted; and one per latest renewal that credit notes gave part of back."""
    remote_by_id = {remote.id: remote.subscription for remote in theirs.subscriptions}
    plans = {plan.id: plan for plan in ours.plans}
    changes: dict[str, list[ScheduledChange]] = {}
    for change in (*ours.applied_changes, *ours.pending_changes):
        if change.state in IN_FORCE:
            changes.setdefault(change.subscription_id, []).append(change)
    findings = []
    for row in sorted(ours.subscriptions, key=lambda row: row.id):
        remote = remote_by_id.get(row.provider_id)
        if remote is None:
            continue
        period = latest_renewal(theirs.invoices.get(row.provider_id, ()))
        finding = _discount_finding(row, remote, period, changes.get(row.id, []), plans)
        if finding is not None:
            findings.append(finding)
        credit = _credit_finding(row, period)
        if credit is not None:
            findings.append(credit)
    return findings


def _credit_finding(row: Subscription, period: BilledPeriod | None) -> Finding | None:
    """The latest renewal, when credit notes gave part of it back."""
    if period is None or not period.credited:
        return None
    return Finding(
        DriftKind.CREDITED_AT_STRIPE,
        f"subscription {row.id} ({row.provider_id}): credit notes on the renewal of "
        f"{period.start.isoformat()} (invoice {period.renewal.id}) gave back "
        f"{format_amount(period.credited, period.currency)}: the period cost "
        f"{format_amount(period.paid, period.currency)}",
        CREDIT_REMEDY,
        billing_account_id=row.billing_account_id,
        subscription_id=row.id,
        provider_subscription_id=row.provider_id,
        stripe_bills=PriceTerms(period.charge.price_id, period.paid, period.currency),
    )


def _discount_finding(
    row: Subscription,
    remote: ProviderSubscription,
    period: BilledPeriod | None,
    changes: Sequence[ScheduledChange],
    plans: Mapping[str, Plan],
) -> Finding | None:
    said: list[str] = []
    stripe_bills: PriceTerms | None = None
    plan = plans.get(row.plan_id)
    if remote.discounts:
        terms = "; ".join(discount.shown() for discount in remote.discounts)
        said.append(f"Stripe takes {terms}")
        if plan is not None:
            after = discounted(plan.amount, plan.currency, remote)
            if after is not None:
                stripe_bills = PriceTerms(
                    remote.price_id, after, plan.currency, remote.interval, remote.interval_count
                )
                said.append(
                    f"plan {plan.name}'s {format_amount(plan.amount, plan.currency)} is billed "
                    f"{format_amount(after, plan.currency)}"
                )
    if period is not None and period.discount:
        in_force = plans.get(plan_in_force(row, changes, period.start))
        said.append(
            f"the renewal of {period.start.isoformat()} (invoice {period.renewal.id}) billed "
            f"{format_amount(period.billed, period.currency)} after "
            f"{format_amount(period.discount, period.currency)} of discounts"
            + (f" (plan {in_force.name})" if in_force is not None else "")
        )
        if stripe_bills is None:
            stripe_bills = PriceTerms(
                period.charge.price_id, period.billed, period.currency, remote.interval
            )
    if not said:
        return None
    return Finding(
        DriftKind.DISCOUNT_AT_STRIPE,
        f"subscription {row.id} ({row.provider_id}): " + "; ".join(said),
        DISCOUNT_REMEDY,
        billing_account_id=row.billing_account_id,
        subscription_id=row.id,
        provider_subscription_id=row.provider_id,
        stripe_bills=stripe_bills,
        we_bill=PriceTerms.of_plan(plan) if plan is not None else None,
    )


def discounted(amount: int, currency: str, remote: ProviderSubscription) -> int | None:
    """What ``amount`` costs once ``remote``'s discounts are taken off it, each from what the
    one before left (``None``: a discount's terms are unknown)."""
    left = amount
    for discount in remote.discounts:
        taken = discount.taken_from(left, currency)
        if taken is None:
            return None
        left -= taken
    return left
