"""The money check (``domain/drift/renewals.py``): each subscription's latest renewal line
against the plan our rows had in force at that period's start, corrections included."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from domain.drift.renewals import plan_in_force, renewal_drift
from domain.drift.report import (
    DriftKind,
    OurSide,
    PriceTerms,
    ProviderSide,
    RemoteSubscription,
)
from domain.drift.rules import find_drift
from domain.subscriptions.change_previews import PreviewLine
from domain.subscriptions.renewals import RENEWAL_REMEDY, BilledInvoice
from domain.subscriptions.scheduled_changes import ScheduledChange
from domain.subscriptions.subscription import ProviderSubscription, Subscription
from tests.support.fakes.clock import T0
from tests.support.fakes.data import a_plan

STARTER = dataclasses.replace(a_plan("starter", "price_starter"), amount=900)
TEAM = dataclasses.replace(a_plan("team", "price_team"), amount=2900)
PLANS = [STARTER, TEAM]
BOUNDARY = T0 + timedelta(days=30)
NEXT_END = BOUNDARY + timedelta(days=30)


def remote(price_id: str) -> ProviderSubscription:
    return ProviderSubscription(
        id="sub_s1",
        status="active",
        item_id="si_1",
        price_id=price_id,
        current_period_start=BOUNDARY,
        current_period_end=NEXT_END,
        billing_cycle_anchor=T0,
    )


def on_team_then_starter_at_the_boundary() -> tuple[Subscription, ScheduledChange]:
    """team until the boundary, starter from it: the change applied at the boundary."""
    row = Subscription.started("sub_1", "ba_1", TEAM, "stripe", remote("price_team"), T0)
    row.current_period_start, row.current_period_end = T0, BOUNDARY
    change = ScheduledChange.at_period_end("chg_1", row, STARTER, now=T0)
    change.applied(BOUNDARY + timedelta(seconds=20))
    row.plan_id = STARTER.id
    row.current_period_start, row.current_period_end = BOUNDARY, NEXT_END
    return row, change


def line(amount: int, price_id: str, *, proration: bool = False) -> PreviewLine:
    return PreviewLine(
        description="",
        amount=amount,
        proration=proration,
        period_start=BOUNDARY,
        period_end=NEXT_END,
        price_id=price_id,
    )


def invoice(invoice_id: str, reason: str, *lines: PreviewLine, minutes: int = 0) -> BilledInvoice:
    return BilledInvoice(
        id=invoice_id,
        status="paid",
        billing_reason=reason,
        currency="usd",
        created=BOUNDARY + timedelta(minutes=minutes),
        lines=lines,
    )


def check(row: Subscription, change: ScheduledChange, *invoices: BilledInvoice) -> list[str]:
    ours = OurSide([], [row], PLANS, applied_changes=[change])
    theirs = ProviderSide([], [], {row.provider_id: list(invoices)})
    return [finding.description for finding in renewal_drift(ours, theirs)]


def test_a_renewal_billed_at_the_old_price_for_a_period_our_row_says_is_the_new_plan_is_drift() -> (
    None
):
    row, change = on_team_then_starter_at_the_boundary()
    renewal = invoice("in_renewal", "subscription_cycle", line(2900, "price_team"))
    ours = OurSide([], [row], PLANS, applied_changes=[change])
    # Stripe's price is starter's now (the late write): only the renewal's money tells.
    listed = RemoteSubscription(remote("price_starter"), "cus_1", T0)
    theirs = ProviderSide([], [listed], {row.provider_id: [renewal]})

    [finding] = find_drift(ours, theirs)

    assert finding.kind is DriftKind.RENEWAL_MISMATCH
    assert finding.subscription_id == "sub_1"
    assert finding.stripe_bills == PriceTerms("price_team", 2900, "usd", "month")
    assert finding.we_bill == PriceTerms.of_plan(STARTER)
    assert "billed 29.00 USD (price_team), no correction" in finding.description
    assert "plan starter (9.00 USD/month (price_starter)) was in force" in finding.description


def test_a_renewal_at_the_plan_in_force_is_no_drift() -> None:
    row, change = on_team_then_starter_at_the_boundary()

    assert (
        check(row, change, invoice("in_1", "subscription_cycle", line(900, "price_starter"))) == []
    )


def test_a_correction_as_of_the_period_start_that_nets_the_period_to_the_plan_is_no_drift() -> None:
    row, change = on_team_then_starter_at_the_boundary()
    renewal = invoice("in_renewal", "subscription_cycle", line(2900, "price_team"))
    correction = invoice(
        "in_fix",
        "subscription_update",
        line(-2900, "price_team", proration=True),
        line(900, "price_starter", proration=True),
        minutes=5,
    )

    assert check(row, change, correction, renewal) == []


def test_a_correction_that_leaves_the_period_short_is_still_drift() -> None:
    row, change = on_team_then_starter_at_the_boundary()
    renewal = invoice("in_renewal", "subscription_cycle", line(2900, "price_team"))
    half = invoice(
        "in_fix", "subscription_update", line(-1000, "price_team", proration=True), minutes=5
    )

    [described] = check(row, change, half, renewal)

    assert "1 correction line(s) included: 19.00 USD for the period" in described


def test_invoices_that_are_not_renewals_and_void_renewals_are_not_checked() -> None:
    row, change = on_team_then_starter_at_the_boundary()
    first = invoice("in_first", "subscription_create", line(2900, "price_team"))
    void = dataclasses.replace(
        invoice("in_void", "subscription_cycle", line(2900, "price_team")), status="void"
    )

    assert check(row, change, first, void) == []


def test_the_plan_in_force_is_the_last_change_made_by_then_else_what_the_first_one_left() -> None:
    row, change = on_team_then_starter_at_the_boundary()

    assert plan_in_force(row, [change], BOUNDARY - timedelta(seconds=1)) == TEAM.id
    assert plan_in_force(row, [change], BOUNDARY) == STARTER.id
    assert plan_in_force(row, [], BOUNDARY - timedelta(days=1)) == STARTER.id


def test_a_renewal_finding_names_our_account_both_subscriptions_and_the_remedy() -> None:
    row, change = on_team_then_starter_at_the_boundary()
    renewal = invoice("in_renewal", "subscription_cycle", line(2900, "price_team"))
    ours = OurSide([], [row], PLANS, applied_changes=[change])

    [finding] = renewal_drift(ours, ProviderSide([], [], {row.provider_id: [renewal]}))

    assert (finding.kind, finding.action) == (DriftKind.RENEWAL_MISMATCH, RENEWAL_REMEDY)
    assert finding.ids == ("ba_1", "sub_1", "sub_s1")


def test_a_change_that_took_effect_after_the_renewal_leaves_the_old_plan_in_force_for_it() -> None:
    row = Subscription.started("sub_1", "ba_1", TEAM, "stripe", remote("price_team"), T0)
    change = ScheduledChange.at_period_end("chg_1", row, STARTER, now=T0)  # at NEXT_END
    change.applied(NEXT_END)
    row.plan_id = STARTER.id

    assert check(row, change, invoice("in_1", "subscription_cycle", line(2900, "price_team"))) == []


def test_a_row_without_changes_is_checked_against_its_own_plan() -> None:
    row = Subscription.started("sub_1", "ba_1", TEAM, "stripe", remote("price_team"), T0)
    theirs = ProviderSide(
        [], [], {"sub_s1": [invoice("in_1", "subscription_cycle", line(900, "price_starter"))]}
    )

    [finding] = renewal_drift(OurSide([], [row], PLANS), theirs)

    assert finding.we_bill == PriceTerms.of_plan(TEAM)


def test_rows_are_checked_in_id_order_past_one_without_invoices() -> None:
    def started(subscription_id: str) -> Subscription:
        provider = dataclasses.replace(remote("price_team"), id=f"sub_s_{subscription_id}")
        return Subscription.started(subscription_id, "ba_1", TEAM, "stripe", provider, T0)

    rows = [started("sub_3"), started("sub_2"), started("sub_1")]
    wrong = [invoice("in_1", "subscription_cycle", line(900, "price_starter"))]
    theirs = ProviderSide([], [], {"sub_s_sub_2": wrong, "sub_s_sub_3": wrong})

    findings = renewal_drift(OurSide([], rows, PLANS), theirs)

    assert [finding.subscription_id for finding in findings] == ["sub_2", "sub_3"]


def test_the_plan_in_force_follows_the_changes_by_when_they_took_effect_not_as_listed() -> None:
    row, to_starter = on_team_then_starter_at_the_boundary()
    back_to_team = ScheduledChange.at_period_end("chg_2", row, TEAM, now=BOUNDARY)  # at NEXT_END
    back_to_team.applied(NEXT_END)
    listed_late_first = [back_to_team, to_starter]

    assert plan_in_force(row, listed_late_first, BOUNDARY - timedelta(seconds=1)) == TEAM.id
    assert plan_in_force(row, listed_late_first, BOUNDARY) == STARTER.id
    assert plan_in_force(row, listed_late_first, NEXT_END) == TEAM.id
