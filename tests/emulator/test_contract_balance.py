"""The customer's balance and Stripe's minimum charge: what an invoice takes from the balance,
and what it does with an amount too small to charge.

Stripe applies the customer's balance (negative: a credit) to each invoice it finalizes. An
amount due below the currency's minimum charge (0.50 USD, 0.30 GBP, 50 JPY...) is not charged:
the invoice is paid at once with nothing due, and the amount is carried to the balance as a
debit that the next invoice adds. So a small upgrade never touches the card, and a declined
card cannot refuse it (https://docs.stripe.com/billing/customer/balance)."""

from __future__ import annotations

import pytest
import stripe  # noqa: TID251 - these tests exercise the emulator through the real SDK

from tests.emulator.billing_support import (
    AFTER_RENEWAL,
    item_of,
    latest_invoice,
    monthly,
    move_to,
    period,
    subscribe,
    upgrade_invoiced_now,
)
from tests.emulator.support import StripeTarget


def _renewal(target: StripeTarget, customer_id: str, subscription_id: str) -> stripe.Invoice:
    """The subscription's renewal invoice, past its period's end."""
    _, end = period(target, subscription_id)
    move_to(target, customer_id, end + AFTER_RENEWAL)
    renewal = latest_invoice(target, subscription_id)
    assert renewal.billing_reason == "subscription_cycle"
    return renewal


def _balance(target: StripeTarget, customer_id: str) -> int:
    return int(target.client.v1.customers.retrieve(customer_id).balance or 0)


def test_a_credit_on_the_customers_balance_is_taken_off_the_next_invoice(
    stripe_target: StripeTarget,
) -> None:
    customer, subscription = subscribe(stripe_target, monthly(stripe_target, 1000))
    stripe_target.client.v1.customers.update(customer.id, params={"balance": -300})

    renewal = _renewal(stripe_target, customer.id, subscription.id)

    assert renewal.total == 1000
    assert renewal.starting_balance == -300
    assert renewal.amount_due == 700
    assert renewal.amount_paid == 700
    assert renewal.ending_balance == 0
    assert _balance(stripe_target, customer.id) == 0


def test_a_credit_larger_than_the_invoice_pays_it_and_keeps_the_rest(
    stripe_target: StripeTarget,
) -> None:
    customer, subscription = subscribe(stripe_target, monthly(stripe_target, 1000))
    stripe_target.client.v1.customers.update(customer.id, params={"balance": -1500})

    renewal = _renewal(stripe_target, customer.id, subscription.id)

    assert renewal.status == "paid"
    assert renewal.amount_due == 0
    assert renewal.ending_balance == -500
    assert _balance(stripe_target, customer.id) == -500


def _upgrade_at_mid_period(
    target: StripeTarget, currency: str, amount: int, step: int
) -> tuple[stripe.Customer, stripe.Subscription, stripe.Price]:
    """A paid monthly subscription in ``currency`` whose customer's card now declines, halfway
    through its period: upgrading by ``step`` then prorates about ``step / 2``."""
    customer, subscription = subscribe(target, monthly(target, amount, currency=currency))
    start, end = period(target, subscription.id)
    move_to(target, customer.id, start + (end - start) // 2)
    target.make_payments_fail(customer.id)
    return customer, subscription, monthly(target, amount + step, currency=currency)


def test_an_upgrade_below_the_minimum_charge_is_made_uncharged_and_carried_to_the_next_invoice(
    stripe_target: StripeTarget,
) -> None:
    customer, subscription, dearer = _upgrade_at_mid_period(stripe_target, "usd", 1000, 40)

    updated = upgrade_invoiced_now(stripe_target, subscription, dearer)  # the card would decline
    small = latest_invoice(stripe_target, subscription.id)
    carried = small.total
    stripe_target.make_payments_succeed(customer.id)
    renewal = _renewal(stripe_target, customer.id, subscription.id)

    assert item_of(updated).price.id == dearer.id
    assert updated.status == "active"
    assert 0 < carried < 50
    assert small.status == "paid"
    assert (small.amount_due, small.amount_paid, small.attempt_count) == (0, 0, 0)
    assert small.ending_balance == carried
    assert renewal.starting_balance == carried
    assert renewal.amount_due == renewal.total + carried == 1040 + carried
    assert renewal.status == "paid"
    assert _balance(stripe_target, customer.id) == 0


@pytest.mark.parametrize(
    ("currency", "amount", "step", "charged"),
    [
        ("usd", 1000, 80, False),  # about 0.40 USD: under 0.50
        ("gbp", 1000, 80, True),  # about 0.40 GBP: over 0.30
        ("jpy", 1000, 80, False),  # about 40 JPY: under 50
        ("eur", 1000, 120, True),  # about 0.60 EUR: over 0.50
    ],
)
def test_the_minimum_charge_is_the_currencys(
    stripe_target: StripeTarget, currency: str, amount: int, step: int, charged: bool
) -> None:
    customer, subscription, dearer = _upgrade_at_mid_period(stripe_target, currency, amount, step)

    if charged:
        with pytest.raises(stripe.CardError):
            upgrade_invoiced_now(stripe_target, subscription, dearer)
        assert _balance(stripe_target, customer.id) == 0
    else:
        upgrade_invoiced_now(stripe_target, subscription, dearer)
        assert (
            _balance(stripe_target, customer.id)
            == latest_invoice(stripe_target, subscription.id).total
        )
