"""What someone did to our subscriptions at Stripe that changes what is billed while the price
ids agree: a coupon (``domain/drift/money_off.py``, ``domain/billing/discounts.py``), reported
with the money it takes, never as a price mismatch; and a subscription schedule, reported and
never fought."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from decimal import Decimal

import pytest

from domain.billing.discounts import ProviderDiscount
from domain.drift.money_off import CREDIT_REMEDY, DISCOUNT_REMEDY, discounted
from domain.drift.report import (
    DriftKind,
    Finding,
    OurSide,
    PriceTerms,
    ProviderSide,
    RemoteSubscription,
)
from domain.drift.rules import find_drift
from domain.errors import FailedPrecondition
from domain.subscriptions.change_previews import PreviewLine
from domain.subscriptions.renewals import BilledInvoice
from domain.subscriptions.subscription import ProviderSubscription, Subscription
from tests.support.fakes.clock import T0
from tests.support.fakes.data import a_plan

TEAM = dataclasses.replace(a_plan("team", "price_team"), amount=2900)
BOUNDARY = T0 + timedelta(days=30)
NEXT_END = BOUNDARY + timedelta(days=30)
TWENTY_PERCENT = ProviderDiscount(
    "di_1", "SPRING", "Spring sale", percent_off=Decimal("20"), duration="forever"
)


def remote(*discounts: ProviderDiscount) -> ProviderSubscription:
    return ProviderSubscription(
        id="sub_s1",
        status="active",
        item_id="si_1",
        price_id="price_team",
        current_period_start=BOUNDARY,
        current_period_end=NEXT_END,
        billing_cycle_anchor=T0,
        discounts=discounts,
    )


def row_of(provider: ProviderSubscription) -> Subscription:
    row = Subscription.started("sub_1", "ba_1", TEAM, "stripe", provider, T0)
    row.current_period_start, row.current_period_end = BOUNDARY, NEXT_END
    return row


def renewal(amount: int, discount: int) -> BilledInvoice:
    line = PreviewLine("", amount, False, BOUNDARY, NEXT_END, "price_team", discount=discount)
    return BilledInvoice("in_renewal", "paid", "subscription_cycle", "usd", BOUNDARY, (line,))


def drift(provider: ProviderSubscription, *invoices: BilledInvoice) -> list[str]:
    row = row_of(remote())
    theirs = ProviderSide(
        [], [RemoteSubscription(provider, "cus_1", T0)], {row.provider_id: list(invoices)}
    )
    return [
        f"{finding.kind.value}: {finding.description}"
        for finding in find_drift(OurSide([], [row], [TEAM]), theirs)
    ]


def test_a_percent_coupon_at_stripe_is_reported_with_what_the_plan_is_billed() -> None:
    row = row_of(remote())
    theirs = ProviderSide([], [RemoteSubscription(remote(TWENTY_PERCENT), "cus_1", T0)])

    [finding] = find_drift(OurSide([], [row], [TEAM]), theirs)

    assert finding.kind is DriftKind.DISCOUNT_AT_STRIPE
    assert finding.description == (
        'subscription sub_1 (sub_s1): Stripe takes 20 % off, forever (coupon SPRING "Spring '
        "sale\"); plan team's 29.00 USD is billed 23.20 USD"
    )
    assert finding.stripe_bills == PriceTerms("price_team", 2320, "usd", "month")
    assert finding.we_bill == PriceTerms.of_plan(TEAM)
    assert not finding.adoptable


def test_an_amount_off_coupon_takes_at_most_the_price() -> None:
    huge = ProviderDiscount(
        "di_2", "FREE", amount_off=5000, currency="usd", duration="once", percent_off=None
    )

    [described] = drift(remote(huge))

    assert "5.00 USD" not in described
    assert "50.00 USD off, on one invoice (coupon FREE)" in described
    assert "is billed 0.00 USD" in described


def test_an_amount_off_coupon_in_another_currency_takes_nothing_and_is_still_reported() -> None:
    euros = ProviderDiscount("di_3", "EURO", amount_off=500, currency="eur", duration="forever")

    [described] = drift(remote(euros))

    assert "5.00 EUR off, forever (coupon EURO)" in described
    assert "is billed 29.00 USD" in described


def test_a_discount_whose_terms_stripe_did_not_show_is_reported_by_its_id() -> None:
    [described] = drift(remote(ProviderDiscount("di_4")))

    assert described == (
        "discount_at_stripe: subscription sub_1 (sub_s1): Stripe takes an unknown discount "
        "(coupon di_4)"
    )


def test_a_renewal_a_coupon_took_from_is_reported_after_the_coupon_is_gone() -> None:
    [described] = drift(remote(), renewal(2900, 2900))

    assert described.endswith(
        f"the renewal of {BOUNDARY.isoformat()} (invoice in_renewal) billed 0.00 USD after "
        "29.00 USD of discounts (plan team)"
    )


def test_a_discounted_renewal_at_the_plans_price_is_no_renewal_mismatch() -> None:
    kinds = [
        described.split(":")[0] for described in drift(remote(TWENTY_PERCENT), renewal(2900, 580))
    ]

    assert kinds == ["discount_at_stripe"]


def test_a_subscription_without_discounts_is_not_reported() -> None:
    assert drift(remote(), renewal(2900, 0)) == []


def test_a_row_keeps_its_discounts_in_words_as_last_read_and_drops_them_when_gone() -> None:
    row = row_of(remote())
    kept = [row.billed_discount]
    row.synced(remote(TWENTY_PERCENT), T0)
    kept.append(row.billed_discount)
    row.synced(remote(), T0)
    kept.append(row.billed_discount)

    assert kept == [None, '20 % off, forever (coupon SPRING "Spring sale")', None]


def test_a_percentage_is_rounded_half_away_from_zero_on_credits_too() -> None:
    half = ProviderDiscount("di_5", percent_off=Decimal("12.5"))

    assert (half.taken_from(100, "usd"), half.taken_from(-100, "usd")) == (13, -13)
    assert half.taken_from(4, "usd") == 1


def test_a_schedule_at_stripe_is_reported_refuses_plan_changes_and_is_forgotten_when_released() -> (
    None
):
    scheduled = dataclasses.replace(remote(), schedule_id="sub_sched_1")
    row = row_of(remote())
    row.synced(scheduled, T0)

    [described] = drift(scheduled)
    with pytest.raises(FailedPrecondition) as refused:
        row.ensure_accepts_plan_changes()
    row.synced(remote(), T0)
    row.ensure_accepts_plan_changes()

    assert described.startswith(
        "schedule_at_stripe: subscription sub_1 (sub_s1): Stripe's subscription schedule "
        "sub_sched_1 manages it"
    )
    assert refused.value.details[0]["reason"] == "SUBSCRIPTION_SCHEDULED_AT_PROVIDER"


def test_credit_notes_on_the_latest_renewal_are_reported_with_what_the_period_cost() -> None:
    credited = dataclasses.replace(renewal(2900, 0), credited=900)

    [described] = drift(remote(), credited)

    assert described == (
        "credited_at_stripe: subscription sub_1 (sub_s1): credit notes on the renewal of "
        f"{BOUNDARY.isoformat()} (invoice in_renewal) gave back 9.00 USD: the period cost "
        "20.00 USD"
    )


def findings_of(provider: ProviderSubscription, *invoices: BilledInvoice) -> list[Finding]:
    row = row_of(remote())
    theirs = ProviderSide(
        [], [RemoteSubscription(provider, "cus_1", T0)], {row.provider_id: list(invoices)}
    )
    return find_drift(OurSide([], [row], [TEAM]), theirs)


def test_each_money_off_finding_names_its_ids_both_sides_money_and_what_to_do() -> None:
    discounted_renewal = renewal(2900, 580)
    credited_renewal = dataclasses.replace(renewal(2900, 0), credited=400)

    [now_and_renewal] = findings_of(remote(TWENTY_PERCENT), discounted_renewal)
    [renewal_only] = findings_of(remote(), discounted_renewal)
    [credited] = findings_of(remote(), credited_renewal)

    assert now_and_renewal == Finding(
        DriftKind.DISCOUNT_AT_STRIPE,
        'subscription sub_1 (sub_s1): Stripe takes 20 % off, forever (coupon SPRING "Spring '
        "sale\"); plan team's 29.00 USD is billed 23.20 USD; the renewal of "
        f"{BOUNDARY.isoformat()} (invoice in_renewal) billed 23.20 USD after 5.80 USD of "
        "discounts (plan team)",
        DISCOUNT_REMEDY,
        billing_account_id="ba_1",
        subscription_id="sub_1",
        provider_subscription_id="sub_s1",
        stripe_bills=PriceTerms("price_team", 2320, "usd", "month"),
        we_bill=PriceTerms.of_plan(TEAM),
    )
    assert renewal_only == dataclasses.replace(
        now_and_renewal,
        description=f"subscription sub_1 (sub_s1): the renewal of {BOUNDARY.isoformat()} "
        "(invoice in_renewal) billed 23.20 USD after 5.80 USD of discounts (plan team)",
    )
    assert credited == Finding(
        DriftKind.CREDITED_AT_STRIPE,
        f"subscription sub_1 (sub_s1): credit notes on the renewal of {BOUNDARY.isoformat()} "
        "(invoice in_renewal) gave back 4.00 USD: the period cost 25.00 USD",
        CREDIT_REMEDY,
        billing_account_id="ba_1",
        subscription_id="sub_1",
        provider_subscription_id="sub_s1",
        stripe_bills=PriceTerms("price_team", 2500, "usd"),
    )


def test_a_discount_is_shown_with_its_terms_and_how_long_it_lasts() -> None:
    ends = BOUNDARY + timedelta(days=90)
    shown = [
        ProviderDiscount("di_a", "A", percent_off=Decimal("12.50"), duration="once").shown(),
        ProviderDiscount(
            "di_b", "B", "Loyal", amount_off=250, currency="eur", duration="repeating", ends_at=ends
        ).shown(),
        ProviderDiscount("di_c", None, percent_off=Decimal("5"), duration="repeating").shown(),
        ProviderDiscount("di_d", amount_off=100, duration="forever").shown(),
    ]

    assert shown == [
        "12.5 % off, on one invoice (coupon A)",
        f'2.50 EUR off, until {ends.isoformat()} (coupon B "Loyal")',
        "5 % off, repeating (coupon di_c)",
        "an unknown discount, forever (coupon di_d)",
    ]


def test_an_amount_off_takes_what_a_line_costs_at_most_and_nothing_from_a_credit() -> None:
    five = ProviderDiscount("di_5", amount_off=500, currency="usd")

    assert [five.taken_from(amount, "usd") for amount in (900, 500, 300, 1, 0, -200)] == [
        500,
        500,
        300,
        1,
        0,
        0,
    ]
    assert ProviderDiscount("di_6").taken_from(900, "usd") is None


def test_discounts_are_taken_one_after_another_and_an_unknown_one_makes_the_price_unknown() -> None:
    half = ProviderDiscount("di_h", percent_off=Decimal("50"))
    dollar = ProviderDiscount("di_d", amount_off=100, currency="usd")

    assert discounted(2900, "usd", remote(half, dollar)) == 1350
    assert discounted(2900, "usd", remote(dollar, half)) == 1400
    assert discounted(2900, "usd", remote(half, ProviderDiscount("di_x"))) is None
    assert discounted(2900, "usd", remote()) == 2900


def test_a_renewal_both_discounted_and_credited_says_what_each_took() -> None:
    both = dataclasses.replace(renewal(2900, 580), credited=320)

    described = drift(remote(), both)

    assert described == [
        f"discount_at_stripe: subscription sub_1 (sub_s1): the renewal of {BOUNDARY.isoformat()} "
        "(invoice in_renewal) billed 23.20 USD after 5.80 USD of discounts (plan team)",
        f"credited_at_stripe: subscription sub_1 (sub_s1): credit notes on the renewal of "
        f"{BOUNDARY.isoformat()} (invoice in_renewal) gave back 3.20 USD: the period cost "
        "20.00 USD",
    ]
