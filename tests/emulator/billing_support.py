"""Helpers for the invoice, proration and payment tests (emulator and real Stripe alike)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import stripe  # noqa: TID251 - these tests exercise the emulator through the real SDK

from tests.emulator.support import StripeTarget

HOUR = 3600
DAY = 86_400
# Past a period's end far enough for Stripe to have finalized and charged the renewal invoice
# (it stays a draft for about an hour when webhook endpoints exist).
AFTER_RENEWAL = 2 * HOUR


def monthly(target: StripeTarget, amount: int, **params: Any) -> stripe.Price:
    return target.price(unit_amount=amount, recurring={"interval": "month"}, **params)


def subscribe(
    target: StripeTarget,
    price: stripe.Price,
    *,
    quantity: int = 1,
    customer: stripe.Customer | None = None,
    **params: Any,
) -> tuple[stripe.Customer, stripe.Subscription]:
    """A subscription of a paying customer (on a test clock on real Stripe)."""
    customer = customer or target.billing_customer(name="Billed")
    subscription = target.client.v1.subscriptions.create(
        params={  # type: ignore[arg-type]
            "customer": customer.id,
            "items": [{"price": price.id, "quantity": quantity}],
            **params,
        }
    )
    return customer, subscription


def item_of(subscription: stripe.Subscription) -> stripe.SubscriptionItem:
    item: stripe.SubscriptionItem = subscription["items"].data[0]
    return item


def period(target: StripeTarget, subscription_id: str) -> tuple[int, int]:
    item = item_of(target.client.v1.subscriptions.retrieve(subscription_id))
    return item.current_period_start, item.current_period_end


def latest_invoice(target: StripeTarget, subscription_id: str) -> stripe.Invoice:
    invoice_id = target.client.v1.subscriptions.retrieve(subscription_id).latest_invoice
    assert isinstance(invoice_id, str)
    return target.client.v1.invoices.retrieve(invoice_id)


def invoices(target: StripeTarget, subscription_id: str) -> list[stripe.Invoice]:
    """The subscription's invoices, newest first."""
    listed = target.client.v1.invoices.list(params={"subscription": subscription_id, "limit": 100})
    return listed.data


def details(line: stripe.InvoiceLineItem) -> Any:
    """What generated a line (a subscription item, or an invoice item such as a proration)."""
    parent = line.parent
    assert parent is not None
    return parent.subscription_item_details or parent.invoice_item_details


def is_proration(line: stripe.InvoiceLineItem) -> bool:
    return bool(details(line).proration)


def price_of(line: stripe.InvoiceLineItem) -> str:
    pricing = line.pricing
    assert pricing is not None
    assert pricing.price_details is not None
    price = pricing.price_details.price
    return price if isinstance(price, str) else price.id


def amounts(invoice: stripe.Invoice) -> list[tuple[int, bool]]:
    """Each line's amount and whether it is a proration, sorted."""
    return sorted((line.amount, is_proration(line)) for line in invoice.lines.data)


def move_to(target: StripeTarget, customer_id: str, when: int) -> None:
    """Advance the customer's time to ``when`` (never backwards)."""
    now = target.now(customer_id)
    if when > now:
        target.advance(customer_id, when - now)


def upgrade_invoiced_now(
    target: StripeTarget,
    subscription: stripe.Subscription,
    price: stripe.Price,
    behavior: str = "error_if_incomplete",
) -> stripe.Subscription:
    """Move the subscription's item to ``price``, its prorations invoiced at once
    (``always_invoice``), with ``payment_behavior`` ``behavior``."""
    return target.client.v1.subscriptions.update(
        subscription.id,
        params={
            "items": [{"id": item_of(subscription).id, "price": price.id}],
            "proration_behavior": "always_invoice",
            "payment_behavior": behavior,
        },
    )


def mid_period_upgrade(
    target: StripeTarget, card: Callable[[str], None]
) -> tuple[stripe.Customer, stripe.Subscription, stripe.Price]:
    """A paid monthly subscription (10 $) half-way through its period, whose customer's card
    then becomes ``card`` (``target.make_payments_fail``...); and a dearer price (30 $)."""
    customer, subscription = subscribe(target, monthly(target, 1000))
    start, end = period(target, subscription.id)
    move_to(target, customer.id, start + (end - start) // 2)
    card(customer.id)
    return customer, subscription, monthly(target, 3000)


def upgrade_held_for_authentication(
    target: StripeTarget,
) -> tuple[stripe.Customer, stripe.Subscription, stripe.Price, stripe.Subscription, str]:
    """An upgrade held pending (``pending_if_incomplete``) for a customer whose card needs
    authentication (:func:`mid_period_upgrade`): the customer, the subscription before it,
    the dearer price, the subscription holding it, and the open invoice it waits for."""
    customer, subscription, dearer = mid_period_upgrade(
        target, target.make_payments_require_authentication
    )
    held = upgrade_invoiced_now(target, subscription, dearer, "pending_if_incomplete")
    invoice = latest_invoice(target, subscription.id)
    assert invoice.id is not None
    return customer, subscription, dearer, held, invoice.id


def open_invoice(
    target: StripeTarget, amount: int, *, quantity: int = 1, **params: Any
) -> tuple[stripe.Customer, stripe.Subscription, stripe.Invoice]:
    """A subscription billed by sent invoice (30 days to pay), and its first invoice, ``open``:
    past any finalization delay (Stripe holds a draft up to 72 h while webhooks fail)."""
    customer, subscription = subscribe(
        target,
        monthly(target, amount),
        quantity=quantity,
        collection_method="send_invoice",
        days_until_due=30,
        **params,
    )
    move_to(target, customer.id, subscription.created + 3 * DAY + 2 * HOUR)
    invoice = latest_invoice(target, subscription.id)
    assert invoice.status == "open"
    return customer, subscription, invoice


def paid_invoice(
    target: StripeTarget, amount: int, **params: Any
) -> tuple[stripe.Customer, stripe.Subscription, stripe.Invoice]:
    """A subscription charged automatically, and its first invoice, ``paid``."""
    customer, subscription = subscribe(target, monthly(target, amount), **params)
    invoice = latest_invoice(target, subscription.id)
    assert invoice.status == "paid"
    return customer, subscription, invoice


def schedule_from(
    target: StripeTarget, subscription: stripe.Subscription
) -> stripe.SubscriptionSchedule:
    """A schedule taking over ``subscription`` (the Dashboard's way: ``from_subscription``)."""
    return target.client.v1.subscription_schedules.create(
        params={"from_subscription": subscription.id}
    )


def then_phase(
    target: StripeTarget,
    schedule: stripe.SubscriptionSchedule,
    price: stripe.Price,
    **params: Any,
) -> stripe.SubscriptionSchedule:
    """Keep ``schedule``'s current phase as it is and add a month on ``price`` after it."""
    current = schedule.phases[0]
    return target.client.v1.subscription_schedules.update(
        schedule.id,
        params={  # type: ignore[arg-type]
            "phases": [
                {
                    "items": [
                        {"price": _price_id(entry.price), "quantity": entry.quantity or 1}
                        for entry in current["items"]
                    ],
                    "start_date": current.start_date,
                    "end_date": current.end_date,
                },
                {
                    "items": [{"price": price.id, "quantity": 1}],
                    "duration": {"interval": "month", "interval_count": 1},
                },
            ],
            **params,
        },
    )


def _price_id(price: Any) -> str:
    return price if isinstance(price, str) else str(price.id)
