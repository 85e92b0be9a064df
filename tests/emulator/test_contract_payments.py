"""Failed payments and ``payment_behavior``: what an update does when its invoice cannot be
paid, and how a subscription recovers. On the emulator payments fail through its admin API; on
real Stripe through a test card that attaches but declines every charge."""

from __future__ import annotations

import pytest
import stripe  # noqa: TID251 - these tests exercise the emulator through the real SDK

from tests.emulator.billing_support import (
    AFTER_RENEWAL,
    invoices,
    item_of,
    latest_invoice,
    mid_period_upgrade,
    monthly,
    move_to,
    period,
    subscribe,
    upgrade_invoiced_now,
)
from tests.emulator.support import StripeTarget


def _declining_subscription(
    target: StripeTarget,
) -> tuple[stripe.Customer, stripe.Subscription, stripe.Price]:
    """A paid monthly subscription whose customer's payments now fail; and a dearer price."""
    return mid_period_upgrade(target, target.make_payments_fail)


def _standing(target: StripeTarget, subscription_id: str) -> list[tuple[str | None, str | None]]:
    """The invoices that count (open or paid: a voided one does not), newest first."""
    return [
        (invoice.id, invoice.status)
        for invoice in invoices(target, subscription_id)
        if invoice.status in ("open", "paid")
    ]


def test_error_if_incomplete_refuses_a_declined_update_and_changes_nothing(
    stripe_target: StripeTarget,
) -> None:
    customer, subscription, dearer = _declining_subscription(stripe_target)
    before = _standing(stripe_target, subscription.id)

    with pytest.raises(stripe.CardError) as raised:
        upgrade_invoiced_now(stripe_target, subscription, dearer, "error_if_incomplete")

    after = stripe_target.client.v1.subscriptions.retrieve(subscription.id)
    pending = stripe_target.client.v1.invoice_items.list(
        params={"customer": customer.id, "pending": True}
    )
    assert raised.value.http_status == 402
    assert raised.value.code == "card_declined"
    assert item_of(after).price.id == item_of(subscription).price.id
    assert after.status == "active"
    assert after.latest_invoice == subscription.latest_invoice
    assert after.pending_update is None
    assert _standing(stripe_target, subscription.id) == before
    assert pending.data == []


def test_allow_incomplete_makes_a_declined_update_and_leaves_the_subscription_past_due(
    stripe_target: StripeTarget,
) -> None:
    customer, subscription, dearer = _declining_subscription(stripe_target)

    updated = upgrade_invoiced_now(stripe_target, subscription, dearer, "allow_incomplete")

    invoice = latest_invoice(stripe_target, subscription.id)
    assert item_of(updated).price.id == dearer.id
    assert updated.status == "past_due"
    assert invoice.billing_reason == "subscription_update"
    assert invoice.status == "open"
    assert invoice.attempt_count == 1
    assert invoice.amount_paid == 0
    assert stripe_target.client.v1.customers.retrieve(customer.id).delinquent is True


def test_pending_if_incomplete_keeps_a_declined_update_pending_until_its_invoice_is_paid(
    stripe_target: StripeTarget,
) -> None:
    customer, subscription, dearer = _declining_subscription(stripe_target)

    held = upgrade_invoiced_now(stripe_target, subscription, dearer, "pending_if_incomplete")
    invoice = latest_invoice(stripe_target, subscription.id)
    stripe_target.make_payments_succeed(customer.id)
    applied = stripe_target.client.v1.subscriptions.retrieve(subscription.id)

    assert held.pending_update is not None
    assert held.pending_update.subscription_items is not None
    assert [i.price.id for i in held.pending_update.subscription_items] == [dearer.id]
    assert held.pending_update.expires_at > stripe_target.now(customer.id)
    assert item_of(held).price.id == item_of(subscription).price.id
    assert held.status == "active"
    assert invoice.status == "open"
    assert applied.pending_update is None
    assert item_of(applied).price.id == dearer.id
    assert applied.status == "active"
    assert latest_invoice(stripe_target, subscription.id).status == "paid"


def test_pending_if_incomplete_accepts_only_what_a_pending_update_can_hold(
    stripe_target: StripeTarget,
) -> None:
    _, subscription, dearer = _declining_subscription(stripe_target)

    with pytest.raises(stripe.InvalidRequestError) as raised:
        stripe_target.client.v1.subscriptions.update(
            subscription.id,
            params={
                "items": [{"id": item_of(subscription).id, "price": dearer.id}],
                "payment_behavior": "pending_if_incomplete",
                "proration_behavior": "always_invoice",
                "description": "not allowed with pending updates",
            },
        )

    assert raised.value.http_status == 400
    assert raised.value.param == "description"


def test_a_declined_renewal_leaves_the_subscription_past_due_until_payments_succeed(
    stripe_target: StripeTarget,
) -> None:
    customer, subscription = subscribe(stripe_target, monthly(stripe_target, 1000))
    _, end = period(stripe_target, subscription.id)
    stripe_target.make_payments_fail(customer.id)

    move_to(stripe_target, customer.id, end + AFTER_RENEWAL)
    failed = stripe_target.client.v1.subscriptions.retrieve(subscription.id)
    renewal = latest_invoice(stripe_target, subscription.id)
    delinquent = stripe_target.client.v1.customers.retrieve(customer.id).delinquent
    stripe_target.make_payments_succeed(customer.id)
    recovered = stripe_target.client.v1.subscriptions.retrieve(subscription.id)

    assert failed.status == "past_due"
    assert renewal.billing_reason == "subscription_cycle"
    assert (renewal.status, renewal.attempted) == ("open", True)
    assert renewal.next_payment_attempt is not None
    assert delinquent is True
    assert recovered.status == "active"
    assert latest_invoice(stripe_target, subscription.id).status == "paid"
    assert stripe_target.client.v1.customers.retrieve(customer.id).delinquent is False
