"""Subscriptions and items: behaviour shared by the emulator and real Stripe test mode.

These subscriptions use a trial, so that real Stripe creates them without a payment method
(it would otherwise leave them ``incomplete``, while the emulator, which has no payment
methods and charges successfully unless told otherwise, makes them ``active``; invoices and
payments are covered by ``test_contract_invoices.py`` and ``test_contract_payments.py``, with
customers who can pay).
"""

from __future__ import annotations

import pytest
import stripe  # noqa: TID251 - these tests exercise the emulator through the real SDK

from tests.emulator.support import StripeTarget


def _subscribe(
    target: StripeTarget, **params: object
) -> tuple[stripe.Customer, stripe.Price, stripe.Subscription]:
    customer = target.customer(name="Subscriber")
    price = target.price(unit_amount=1200, recurring={"interval": "month"})
    subscription = target.client.v1.subscriptions.create(
        params={  # type: ignore[arg-type]
            "customer": customer.id,
            "items": [{"price": price.id, "quantity": 3}],
            "trial_period_days": 14,
            **params,
        }
    )
    return customer, price, subscription


def test_a_subscription_is_created_trialing_with_periods_on_its_items(
    stripe_target: StripeTarget,
) -> None:
    customer, price, subscription = _subscribe(stripe_target, metadata={"org": "7"})

    item = subscription["items"].data[0]
    assert subscription.id.startswith("sub_")
    assert item.id.startswith("si_")
    assert subscription.status == "trialing"
    assert subscription.customer == customer.id
    assert subscription.metadata.to_dict() == {"org": "7"}
    assert subscription.trial_end is not None
    assert subscription.trial_start is not None
    assert subscription.trial_end - subscription.trial_start == 14 * 86_400
    assert item.price.id == price.id
    assert item.quantity == 3
    # API 2026-10-28.endive: the current period lives on items, not on the subscription.
    assert "current_period_end" not in subscription
    assert item.current_period_start == subscription.trial_start
    assert item.current_period_end == subscription.trial_end


def test_replacing_an_items_price_keeps_the_item(stripe_target: StripeTarget) -> None:
    _, _, subscription = _subscribe(stripe_target)
    item = subscription["items"].data[0]
    new_price = stripe_target.price(unit_amount=2400, recurring={"interval": "month"})

    updated = stripe_target.client.v1.subscriptions.update(
        subscription.id,
        params={
            "items": [{"id": item.id, "price": new_price.id}],
            "proration_behavior": "none",
        },
    )

    assert [(i.id, i.price.id) for i in updated["items"].data] == [(item.id, new_price.id)]


def test_an_unknown_proration_behavior_is_rejected(stripe_target: StripeTarget) -> None:
    _, _, subscription = _subscribe(stripe_target)

    with pytest.raises(stripe.InvalidRequestError) as raised:
        stripe_target.client.v1.subscriptions.update(
            subscription.id, params={"proration_behavior": "sometimes"}
        )

    assert raised.value.http_status == 400
    assert raised.value.param == "proration_behavior"


def test_cancel_at_period_end_schedules_the_cancel_and_can_be_undone(
    stripe_target: StripeTarget,
) -> None:
    _, _, subscription = _subscribe(stripe_target)
    period_end = subscription["items"].data[0].current_period_end

    scheduled = stripe_target.client.v1.subscriptions.update(
        subscription.id, params={"cancel_at_period_end": True}
    )
    undone = stripe_target.client.v1.subscriptions.update(
        subscription.id, params={"cancel_at_period_end": False}
    )

    assert scheduled.cancel_at_period_end is True
    assert scheduled.cancel_at == period_end
    assert scheduled.status == "trialing"
    assert undone.cancel_at_period_end is False
    assert undone.cancel_at is None


def test_canceling_a_subscription_ends_it_now(stripe_target: StripeTarget) -> None:
    _, _, subscription = _subscribe(stripe_target)

    canceled = stripe_target.client.v1.subscriptions.cancel(subscription.id)

    assert canceled.status == "canceled"
    assert canceled.canceled_at is not None
    assert canceled.ended_at is not None
    with pytest.raises(stripe.InvalidRequestError) as raised:
        stripe_target.client.v1.subscriptions.update(subscription.id, params={"description": "x"})
    assert raised.value.http_status == 400


def test_canceling_twice_answers_no_such_subscription(stripe_target: StripeTarget) -> None:
    _, _, subscription = _subscribe(stripe_target)
    stripe_target.client.v1.subscriptions.cancel(subscription.id)

    with pytest.raises(stripe.InvalidRequestError) as raised:
        stripe_target.client.v1.subscriptions.cancel(subscription.id)

    assert raised.value.http_status == 404
    assert raised.value.code == "resource_missing"


def test_subscriptions_are_listed_by_customer_status_and_price(
    stripe_target: StripeTarget,
) -> None:
    customer, price, subscription = _subscribe(stripe_target)
    other_price = stripe_target.price(recurring={"interval": "month"})
    canceled = stripe_target.client.v1.subscriptions.create(
        params={
            "customer": customer.id,
            "items": [{"price": other_price.id}],
            "trial_period_days": 7,
        }
    )
    stripe_target.client.v1.subscriptions.cancel(canceled.id)
    subscriptions = stripe_target.client.v1.subscriptions

    default = subscriptions.list(params={"customer": customer.id})
    everything = subscriptions.list(params={"customer": customer.id, "status": "all"})
    only_canceled = subscriptions.list(params={"customer": customer.id, "status": "canceled"})
    by_price = subscriptions.list(params={"customer": customer.id, "price": price.id})

    assert [s.id for s in default.data] == [subscription.id]
    assert {s.id for s in everything.data} == {subscription.id, canceled.id}
    assert [s.id for s in only_canceled.data] == [canceled.id]
    assert [s.id for s in by_price.data] == [subscription.id]


def test_subscription_items_are_listed_and_retrieved(stripe_target: StripeTarget) -> None:
    _, price, subscription = _subscribe(stripe_target)
    item = subscription["items"].data[0]

    listed = stripe_target.client.v1.subscription_items.list(
        params={"subscription": subscription.id}
    )
    fetched = stripe_target.client.v1.subscription_items.retrieve(item.id)

    assert [i.id for i in listed.data] == [item.id]
    assert fetched.subscription == subscription.id
    assert fetched.price.id == price.id


def test_a_subscription_expands_items_prices_products_and_the_customer(
    stripe_target: StripeTarget,
) -> None:
    customer, price, subscription = _subscribe(stripe_target)

    fetched = stripe_target.client.v1.subscriptions.retrieve(
        subscription.id, params={"expand": ["items.data.price.product", "customer"]}
    )

    product = fetched["items"].data[0].price.product
    assert isinstance(product, stripe.Product)
    assert product.id == price.product
    assert isinstance(fetched.customer, stripe.Customer)
    assert fetched.customer.id == customer.id


def test_a_subscription_needs_items(stripe_target: StripeTarget) -> None:
    customer = stripe_target.customer(name="No items")

    with pytest.raises(stripe.InvalidRequestError) as raised:
        stripe_target.client.v1.subscriptions.create(params={"customer": customer.id})

    assert raised.value.code == "parameter_missing"
    assert raised.value.param == "items"


def test_a_subscription_for_a_missing_customer_is_a_404(stripe_target: StripeTarget) -> None:
    price = stripe_target.price(recurring={"interval": "month"})

    with pytest.raises(stripe.InvalidRequestError) as raised:
        stripe_target.client.v1.subscriptions.create(
            params={"customer": "cus_missing00000", "items": [{"price": price.id}]}
        )

    assert raised.value.http_status == 404
    assert raised.value.code == "resource_missing"
    assert raised.value.param == "customer"


def test_subscription_items_auto_paginate_through_the_list_url(
    stripe_target: StripeTarget,
) -> None:
    customer = stripe_target.customer(name="Many items")
    prices = [stripe_target.price(recurring={"interval": "month"}) for _ in range(3)]
    subscription = stripe_target.client.v1.subscriptions.create(
        params={
            "customer": customer.id,
            "items": [{"price": price.id} for price in prices],
            "trial_period_days": 3,
        }
    )

    page = stripe_target.client.v1.subscription_items.list(
        params={"subscription": subscription.id, "limit": 1}
    )

    assert {item.price.id for item in page.auto_paging_iter()} == {price.id for price in prices}


def test_a_subscription_that_sends_invoices_is_active_without_a_payment_method(
    stripe_target: StripeTarget,
) -> None:
    # How `billing-worker subscriptions create` subscribes a customer by default.
    customer = stripe_target.customer(name="Invoiced", email="billing@invoiced.example")
    price = stripe_target.price(unit_amount=900, recurring={"interval": "month"})

    subscription = stripe_target.client.v1.subscriptions.create(
        params={
            "customer": customer.id,
            "items": [{"price": price.id}],
            "collection_method": "send_invoice",
            "days_until_due": 30,
        }
    )

    item = subscription["items"].data[0]
    assert subscription.status == "active"
    assert (subscription.collection_method, subscription.days_until_due) == ("send_invoice", 30)
    assert item.current_period_start < item.current_period_end


def test_a_new_subscription_bills_in_flexible_mode_by_default_on_our_api_version(
    stripe_target: StripeTarget,
) -> None:
    _, _, subscription = _subscribe(stripe_target)

    assert subscription.billing_mode.type == "flexible"


@pytest.mark.parametrize("mode", ["classic", "flexible"])
def test_the_billing_mode_asked_for_is_the_subscriptions(
    stripe_target: StripeTarget, mode: str
) -> None:
    _, _, subscription = _subscribe(stripe_target, billing_mode={"type": mode})

    again = stripe_target.client.v1.subscriptions.retrieve(subscription.id)
    assert subscription.billing_mode.type == again.billing_mode.type == mode
