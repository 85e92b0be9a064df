"""The money check of the drift report (issue 29): what each subscription's latest renewal
invoice billed, against the plan our rows had in force at that period's start.

Ids can agree while money does not: a change recorded as taking effect at the boundary while
Stripe renewed at the old price (the write reached Stripe after the renewal) leaves the price
at Stripe right *now* and the renewal wrong. So the check reads invoices, not prices:

* the renewal is the newest invoice made for a new period (``billing_reason``
  ``subscription_cycle``; a void one is not billed), and its line for the subscription's item
  that is not a proration (the period's charge);
* the plan in force at the period's start is the target of the last change our rows made
  (``applied``, or ``staged`` at Stripe) that took effect at or before it; before the first
  change, the plan that change left; without changes, the row's plan;
* a correction counts: the proration lines of the subscription's invoices that start with
  the period (a correction is prorated as of the period's start) are added to the renewal's,
  so a period netted to the plan's price is not drift;
* it is drift when the period nets to another amount or currency than the plan's, or the
  renewal billed another price and nothing corrected it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from domain.drift.report import (
    DriftKind,
    Finding,
    OurSide,
    PriceTerms,
    ProviderSide,
)
from domain.subscriptions.change_states import ChangeState
from domain.subscriptions.plans import Plan
from domain.subscriptions.renewals import RENEWAL_REMEDY, BilledInvoice, latest_renewal
from domain.subscriptions.scheduled_changes import ScheduledChange
from domain.subscriptions.subscription import Subscription

IN_FORCE = (ChangeState.APPLIED, ChangeState.STAGED)


def renewal_drift(ours: OurSide, theirs: ProviderSide) -> list[Finding]:
    """A finding per subscription whose latest renewal billed other money than its plan."""
    plans = {plan.id: plan for plan in ours.plans}
    changes: dict[str, list[ScheduledChange]] = {}
    for change in (*ours.applied_changes, *ours.pending_changes):
        if change.state in IN_FORCE:
            changes.setdefault(change.subscription_id, []).append(change)
    findings = []
    for row in sorted(ours.subscriptions, key=lambda row: row.id):
        invoices = theirs.invoices.get(row.provider_id)
        if not invoices:
            continue
        finding = _renewal_finding(row, invoices, changes.get(row.id, []), plans)
        if finding is not None:
            findings.append(finding)
    return findings


def plan_in_force(row: Subscription, changes: Sequence[ScheduledChange], moment: datetime) -> str:
    """The plan our rows say was in force at ``moment``."""
    made = sorted(
        (change for change in changes if change.state in IN_FORCE),
        key=lambda change: (change.effective_at, change.created_at),
    )
    before = [change for change in made if change.effective_at <= moment]
    if before:
        return before[-1].target_plan_id
    if made:
        return made[0].from_plan_id
    return row.plan_id


def _renewal_finding(
    row: Subscription,
    invoices: Sequence[BilledInvoice],
    changes: Sequence[ScheduledChange],
    plans: Mapping[str, Plan],
) -> Finding | None:
    period = latest_renewal(invoices)
    if period is None:
        return None
    plan = plans.get(plan_in_force(row, changes, period.start))
    if plan is None:
        return None
    if period.bills(plan):
        return None
    stripe_bills = PriceTerms(
        period.charge.price_id, period.net, period.currency, plan.interval.value
    )
    return Finding(
        DriftKind.RENEWAL_MISMATCH,
        f"subscription {row.id} ({row.provider_id}): {period.shown()}, while plan {plan.name} "
        f"({PriceTerms.of_plan(plan).shown()}) was in force here at its start",
        RENEWAL_REMEDY,
        billing_account_id=row.billing_account_id,
        subscription_id=row.id,
        provider_subscription_id=row.provider_id,
        stripe_bills=stripe_bills,
        we_bill=PriceTerms.of_plan(plan),
    )
