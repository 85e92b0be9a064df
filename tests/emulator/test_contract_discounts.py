"""Coupons and the discounts they make on subscriptions: what each invoice takes off.

A coupon takes a percentage or an amount off, once, for some months or forever
(https://docs.stripe.com/billing/subscriptions/coupons). Redeemed on a subscription it becomes
a discount that every invoice made while it lasts applies: a percentage of each subscription
line, or an amount once per invoice spread over its lines and never more than they bill; the
customer's balance then applies to what is left. Prorations take the discount too: with
``billing_mode[flexible][proration_discounts]=itemized`` their amounts are gross and their
``discount_amounts`` carry the discount, with ``included`` (the default) their amounts are net
and the discount amounts 0
(https://docs.stripe.com/changelog/clover/2025-09-30/itemize-proration-discount-amounts).
"""

from __future__ import annotations

from typing import Any

import pytest
import stripe  # noqa: TID251 - these tests exercise the emulator through the real SDK

from tests.emulator.billing_support import (
    AFTER_RENEWAL,
    is_proration,
    item_of,
    latest_invoice,
    monthly,
    move_to,
    period,
    subscribe,
)
from tests.emulator.support import StripeTarget


def _renewal(target: StripeTarget, customer_id: str, subscription_id: str) -> stripe.Invoice:
    """The subscription's next renewal invoice, past its period's end."""
    _, end = period(target, subscription_id)
    move_to(target, customer_id, end + AFTER_RENEWAL)
    renewal = latest_invoice(target, subscription_id)
    assert renewal.billing_reason == "subscription_cycle"
    return renewal


def _discounted(invoice: stripe.Invoice) -> int:
    return sum(entry.amount for entry in invoice.total_discount_amounts or [])


def _line_discounts(line: stripe.InvoiceLineItem) -> int:
    return sum(entry.amount for entry in line.discount_amounts or [])


def _with_coupon(
    target: StripeTarget, amount: int, **coupon: Any
) -> tuple[stripe.Customer, stripe.Subscription, stripe.Coupon]:
    redeemed = target.coupon(**coupon)
    customer, subscription = subscribe(
        target, monthly(target, amount), discounts=[{"coupon": redeemed.id}]
    )
    return customer, subscription, redeemed


def test_a_coupon_is_created_listed_renamed_and_deleted(stripe_target: StripeTarget) -> None:
    coupons = stripe_target.client.v1.coupons
    created = stripe_target.coupon(percent_off=12.5, duration="forever", name="Launch")

    renamed = coupons.update(created.id, params={"name": "Launch week"})
    listed = coupons.list(params={"limit": 100})
    deleted = coupons.delete(created.id)

    assert (created.percent_off, created.amount_off, created.duration) == (12.5, None, "forever")
    assert (created.times_redeemed, created.valid, created.duration_in_months) == (0, True, None)
    assert renamed.name == "Launch week"
    assert created.id in [coupon.id for coupon in listed.data]
    assert deleted.deleted is True
    with pytest.raises(stripe.InvalidRequestError) as missing:
        coupons.retrieve(created.id)
    assert missing.value.code == "resource_missing"


@pytest.mark.parametrize(
    "params",
    [
        {"duration": "once"},  # neither percent_off nor amount_off
        {"percent_off": 10, "amount_off": 100, "currency": "usd"},
        {"amount_off": 100},  # no currency
        {"percent_off": 0},
        {"percent_off": 101},
        {"percent_off": 10, "duration": "repeating"},  # no duration_in_months
        {"percent_off": 10, "duration": "forever", "duration_in_months": 3},
    ],
)
def test_a_coupon_needs_one_valid_amount_and_a_consistent_duration(
    stripe_target: StripeTarget, params: dict[str, Any]
) -> None:
    with pytest.raises(stripe.InvalidRequestError):
        stripe_target.coupon(**params)


def test_a_redeemed_coupon_makes_a_discount_on_the_subscription(
    stripe_target: StripeTarget,
) -> None:
    customer, subscription, coupon = _with_coupon(
        stripe_target, 1000, percent_off=25, duration="repeating", duration_in_months=3
    )

    expanded = stripe_target.client.v1.subscriptions.retrieve(
        subscription.id, params={"expand": ["discounts.source.coupon"]}
    )
    discount = expanded.discounts[0]
    assert not isinstance(discount, str)
    assert discount.object == "discount"
    assert discount.id.startswith("di_")
    assert (discount.subscription, discount.customer) == (subscription.id, customer.id)
    assert discount.source.type == "coupon"
    source = discount.source.coupon
    assert not isinstance(source, str)
    assert source is not None
    assert source.id == coupon.id
    assert discount.end is not None
    assert discount.end > discount.start
    assert subscription.discounts == [discount.id]
    assert stripe_target.client.v1.coupons.retrieve(coupon.id).times_redeemed == 1


def test_a_forever_percent_coupon_takes_its_share_off_every_renewal(
    stripe_target: StripeTarget,
) -> None:
    customer, subscription, _ = _with_coupon(
        stripe_target, 1000, percent_off=25, duration="forever"
    )
    first = latest_invoice(stripe_target, subscription.id)

    renewal = _renewal(stripe_target, customer.id, subscription.id)
    later = _renewal(stripe_target, customer.id, subscription.id)

    for invoice in (first, renewal, later):
        assert (invoice.subtotal, _discounted(invoice), invoice.total) == (1000, 250, 750)
        assert invoice.amount_paid == 750
        line = invoice.lines.data[0]
        assert (line.amount, _line_discounts(line)) == (1000, 250)
        assert invoice.discounts == subscription.discounts


def test_an_amount_off_coupon_is_spread_over_the_lines_in_proportion(
    stripe_target: StripeTarget,
) -> None:
    coupon = stripe_target.coupon(amount_off=400, currency="usd", duration="forever")
    customer = stripe_target.billing_customer(name="Two items")
    subscription = stripe_target.client.v1.subscriptions.create(
        params={
            "customer": customer.id,
            "items": [
                {"price": monthly(stripe_target, 1000).id},
                {"price": monthly(stripe_target, 3000).id},
            ],
            "discounts": [{"coupon": coupon.id}],
        }
    )

    invoice = latest_invoice(stripe_target, subscription.id)

    assert (invoice.subtotal, _discounted(invoice), invoice.total) == (4000, 400, 3600)
    assert sorted(_line_discounts(line) for line in invoice.lines.data) == [100, 300]


def test_an_amount_off_coupon_takes_its_amount_off_one_invoice_and_never_more_than_it_bills(
    stripe_target: StripeTarget,
) -> None:
    customer, subscription, _ = _with_coupon(
        stripe_target, 1000, amount_off=1500, currency="usd", duration="once"
    )
    first = latest_invoice(stripe_target, subscription.id)

    renewal = _renewal(stripe_target, customer.id, subscription.id)

    assert (first.subtotal, _discounted(first), first.total, first.amount_due) == (1000, 1000, 0, 0)
    assert first.status == "paid"
    assert (renewal.total, _discounted(renewal)) == (1000, 0)
    balance = stripe_target.client.v1.customers.retrieve(customer.id).balance
    assert not balance  # the 5 $ the coupon could not take are not kept


def test_a_once_coupon_applies_to_one_invoice_and_is_gone(stripe_target: StripeTarget) -> None:
    customer, subscription, _ = _with_coupon(stripe_target, 1000, percent_off=50, duration="once")
    first = latest_invoice(stripe_target, subscription.id)

    renewal = _renewal(stripe_target, customer.id, subscription.id)

    assert (first.total, _discounted(first)) == (500, 500)
    assert (renewal.total, _discounted(renewal)) == (1000, 0)
    assert stripe_target.client.v1.subscriptions.retrieve(subscription.id).discounts == []


def test_a_repeating_coupon_stops_after_its_months(stripe_target: StripeTarget) -> None:
    customer, subscription, _ = _with_coupon(
        stripe_target, 1000, percent_off=10, duration="repeating", duration_in_months=2
    )
    first = latest_invoice(stripe_target, subscription.id)

    second = _renewal(stripe_target, customer.id, subscription.id)
    third = _renewal(stripe_target, customer.id, subscription.id)

    assert [first.total, second.total, third.total] == [900, 900, 1000]


def _halfway(target: StripeTarget, customer_id: str, subscription_id: str) -> int:
    start, end = period(target, subscription_id)
    halfway = start + (end - start) // 2
    move_to(target, customer_id, halfway)
    return halfway


def _upgrade_params(
    subscription: stripe.Subscription, price: stripe.Price, at: int
) -> dict[str, Any]:
    return {
        "items": [{"id": item_of(subscription).id, "price": price.id}],
        "proration_behavior": "always_invoice",
        "proration_date": at,
    }


def _summary(invoice: stripe.Invoice) -> tuple[Any, ...]:
    lines = sorted((line.amount, _line_discounts(line)) for line in invoice.lines.data)
    return invoice.subtotal, _discounted(invoice), invoice.total, lines


def test_a_preview_of_a_discounted_subscriptions_change_equals_the_invoice_the_change_makes(
    stripe_target: StripeTarget,
) -> None:
    customer, subscription, _ = _with_coupon(
        stripe_target, 1000, percent_off=20, duration="forever"
    )
    halfway = _halfway(stripe_target, customer.id, subscription.id)
    dearer = monthly(stripe_target, 3000)
    change = _upgrade_params(subscription, dearer, halfway)

    preview = stripe_target.client.v1.invoices.create_preview(
        params={"subscription": subscription.id, "subscription_details": change}  # type: ignore[arg-type]
    )
    stripe_target.client.v1.subscriptions.update(subscription.id, params=change)  # type: ignore[arg-type]
    invoice = latest_invoice(stripe_target, subscription.id)

    assert invoice.billing_reason == "subscription_update"
    assert _summary(preview) == _summary(invoice)
    assert invoice.total == invoice.subtotal - _discounted(invoice)
    assert 0 < invoice.total < 1000  # 20 % off the 10 $ of half a month's upgrade


def test_itemized_prorations_show_gross_amounts_and_their_discounts_while_included_ones_show_net(
    stripe_target: StripeTarget,
) -> None:
    coupon = stripe_target.coupon(percent_off=20, duration="forever")
    price = monthly(stripe_target, 1000)
    customer = stripe_target.billing_customer(name="Both ways")
    made = {
        way: subscribe(
            stripe_target,
            price,
            customer=customer,
            discounts=[{"coupon": coupon.id}],
            billing_mode={"type": "flexible", "flexible": {"proration_discounts": way}},
        )[1]
        for way in ("itemized", "included")
    }
    halfway = _halfway(stripe_target, customer.id, made["itemized"].id)
    dearer = monthly(stripe_target, 3000)
    invoices = {}
    for way, subscription in made.items():
        assert subscription.billing_mode.flexible is not None
        assert subscription.billing_mode.flexible.proration_discounts == way
        stripe_target.client.v1.subscriptions.update(
            subscription.id,
            params=_upgrade_params(subscription, dearer, halfway),  # type: ignore[arg-type]
        )
        invoices[way] = latest_invoice(stripe_target, subscription.id)

    def prorations(way: str) -> list[tuple[int, int]]:
        lines = [line for line in invoices[way].lines.data if is_proration(line)]
        return sorted((line.amount, _line_discounts(line)) for line in lines)

    itemized, included = prorations("itemized"), prorations("included")
    assert len(itemized) == len(included) == 2
    (credit, credit_off), (debit, debit_off) = itemized
    assert credit < 0 < debit
    assert credit_off == round(credit * 0.2)
    assert debit_off == round(debit * 0.2)
    assert [amount for amount, _ in included] == [credit - credit_off, debit - debit_off]
    assert [off for _, off in included] == [0, 0]
    assert invoices["itemized"].total == invoices["included"].total


def test_a_deleted_coupon_can_no_longer_be_redeemed_but_its_discounts_keep_applying(
    stripe_target: StripeTarget,
) -> None:
    customer, subscription, coupon = _with_coupon(
        stripe_target, 1000, percent_off=25, duration="forever"
    )
    stripe_target.client.v1.coupons.delete(coupon.id)

    with pytest.raises(stripe.InvalidRequestError) as refused:
        subscribe(stripe_target, monthly(stripe_target, 1000), discounts=[{"coupon": coupon.id}])
    renewal = _renewal(stripe_target, customer.id, subscription.id)

    assert refused.value.code == "resource_missing"
    assert refused.value.param == "discounts[0][coupon]"
    assert (renewal.total, _discounted(renewal)) == (750, 250)


def test_an_amount_off_coupon_in_another_currency_is_refused(stripe_target: StripeTarget) -> None:
    coupon = stripe_target.coupon(amount_off=500, currency="eur", duration="forever")

    with pytest.raises(stripe.InvalidRequestError) as refused:
        subscribe(stripe_target, monthly(stripe_target, 1000), discounts=[{"coupon": coupon.id}])

    assert refused.value.http_status == 400
    assert stripe_target.client.v1.coupons.retrieve(coupon.id).times_redeemed == 0


def test_clearing_the_discounts_with_an_empty_string_bills_the_list_price_again(
    stripe_target: StripeTarget,
) -> None:
    customer, subscription, _ = _with_coupon(
        stripe_target, 1000, percent_off=25, duration="forever"
    )

    cleared = stripe_target.client.v1.subscriptions.update(
        subscription.id,
        params={"discounts": ""},
    )
    renewal = _renewal(stripe_target, customer.id, subscription.id)

    assert cleared.discounts == []
    assert (renewal.total, _discounted(renewal)) == (1000, 0)


def test_a_coupon_added_by_an_update_applies_from_the_next_invoice(
    stripe_target: StripeTarget,
) -> None:
    customer, subscription = subscribe(stripe_target, monthly(stripe_target, 1000))
    coupon = stripe_target.coupon(percent_off=30, duration="forever")

    updated = stripe_target.client.v1.subscriptions.update(
        subscription.id, params={"discounts": [{"coupon": coupon.id}]}
    )
    renewal = _renewal(stripe_target, customer.id, subscription.id)

    assert len(updated.discounts) == 1
    assert (renewal.total, _discounted(renewal)) == (700, 300)


def test_a_credit_on_the_balance_applies_after_the_discount(stripe_target: StripeTarget) -> None:
    customer, subscription, _ = _with_coupon(
        stripe_target, 1000, percent_off=25, duration="forever"
    )
    stripe_target.client.v1.customers.update(customer.id, params={"balance": -300})

    renewal = _renewal(stripe_target, customer.id, subscription.id)

    assert (renewal.subtotal, renewal.total) == (1000, 750)
    assert renewal.starting_balance == -300
    assert renewal.amount_due == renewal.amount_paid == 450
    assert renewal.ending_balance == 0


def test_a_credit_gives_back_what_was_charged_after_a_once_coupon_was_spent(
    stripe_target: StripeTarget,
) -> None:
    customer, subscription, _ = _with_coupon(stripe_target, 1000, percent_off=50, duration="once")
    halfway = _halfway(stripe_target, customer.id, subscription.id)
    cheaper = monthly(stripe_target, 200)

    stripe_target.client.v1.subscriptions.update(
        subscription.id,
        params=_upgrade_params(subscription, cheaper, halfway),  # type: ignore[arg-type]
    )
    invoice = latest_invoice(stripe_target, subscription.id)

    credits = [line for line in invoice.lines.data if is_proration(line) and line.amount < 0]
    debits = [line for line in invoice.lines.data if is_proration(line) and line.amount > 0]
    assert len(credits) == len(debits) == 1
    assert abs(credits[0].amount - _line_discounts(credits[0]) + 250) <= 1  # half of the 5 $ paid
    assert _line_discounts(debits[0]) == 0  # the once discount is gone
    assert abs(invoice.total + 150) <= 1


def test_a_discounted_changes_prorations_are_billed_at_the_renewal_as_previewed(
    stripe_target: StripeTarget,
) -> None:
    customer, subscription, _ = _with_coupon(
        stripe_target, 1000, percent_off=20, duration="forever"
    )
    halfway = _halfway(stripe_target, customer.id, subscription.id)
    change = {**_upgrade_params(subscription, monthly(stripe_target, 3000), halfway)}
    change["proration_behavior"] = "create_prorations"
    stripe_target.client.v1.subscriptions.update(subscription.id, params=change)  # type: ignore[arg-type]

    preview = stripe_target.client.v1.invoices.create_preview(
        params={"subscription": subscription.id}
    )
    renewal = _renewal(stripe_target, customer.id, subscription.id)

    assert _summary(preview) == _summary(renewal)
    assert sorted(line.amount for line in renewal.lines.data if not is_proration(line)) == [3000]
    assert _discounted(renewal) >= 600  # 20 % of the 30 $ period at least
