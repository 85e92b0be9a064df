"""Invoices subscriptions make, read through the SDK: the same assertions against the emulator
and, with ``STRIPE_TEST_API_KEY``, real Stripe test mode (customers on test clocks, paying with
test cards)."""

from __future__ import annotations

import pytest
import stripe  # noqa: TID251 - these tests exercise the emulator through the real SDK

from tests.emulator.billing_support import (
    AFTER_RENEWAL,
    DAY,
    HOUR,
    amounts,
    details,
    invoices,
    is_proration,
    item_of,
    latest_invoice,
    monthly,
    move_to,
    period,
    price_of,
    subscribe,
)
from tests.emulator.support import StripeTarget


def test_a_new_subscription_invoices_its_first_period_at_once(
    stripe_target: StripeTarget,
) -> None:
    price = monthly(stripe_target, 1200)
    customer, subscription = subscribe(stripe_target, price, quantity=2)

    invoice = latest_invoice(stripe_target, subscription.id)

    line = invoice.lines.data[0]
    item = item_of(subscription)
    assert invoice.billing_reason == "subscription_create"
    assert invoice.status == "paid"
    assert (invoice.total, invoice.amount_due, invoice.amount_paid) == (2400, 2400, 2400)
    assert invoice.customer == customer.id
    assert invoice.parent is not None
    assert invoice.parent.subscription_details is not None
    assert invoice.parent.subscription_details.subscription == subscription.id
    assert invoice.number is not None
    assert invoice.number.startswith(f"{customer.invoice_prefix}-")
    assert len(invoice.lines.data) == 1
    assert (line.amount, line.quantity, price_of(line)) == (2400, 2, price.id)
    assert details(line).subscription_item == item.id
    assert not is_proration(line)
    assert (line.period.start, line.period.end) == (
        item.current_period_start,
        item.current_period_end,
    )


def test_a_trial_starts_with_a_zero_invoice_paid_at_once(stripe_target: StripeTarget) -> None:
    _, subscription = subscribe(stripe_target, monthly(stripe_target, 1200), trial_period_days=7)

    invoice = latest_invoice(stripe_target, subscription.id)

    assert subscription.status == "trialing"
    assert (invoice.billing_reason, invoice.status, invoice.total) == (
        "subscription_create",
        "paid",
        0,
    )
    assert [line.amount for line in invoice.lines.data] == [0]


def test_a_renewal_invoices_the_new_period_at_the_price_the_item_has_then(
    stripe_target: StripeTarget,
) -> None:
    old, new = monthly(stripe_target, 1000), monthly(stripe_target, 2500)
    customer, subscription = subscribe(stripe_target, old)
    _, end = period(stripe_target, subscription.id)
    move_to(stripe_target, customer.id, end - DAY)
    stripe_target.client.v1.subscriptions.update(
        subscription.id,
        params={
            "items": [{"id": item_of(subscription).id, "price": new.id}],
            "proration_behavior": "none",
        },
    )

    move_to(stripe_target, customer.id, end + AFTER_RENEWAL)

    renewal = latest_invoice(stripe_target, subscription.id)
    line = renewal.lines.data[0]
    assert renewal.billing_reason == "subscription_cycle"
    assert renewal.status == "paid"
    assert len(renewal.lines.data) == 1
    assert (line.amount, price_of(line), is_proration(line)) == (2500, new.id, False)
    assert line.period.start == end
    assert (line.period.start, line.period.end) == period(stripe_target, subscription.id)
    assert len(invoices(stripe_target, subscription.id)) == 2


def test_a_change_without_proration_after_the_renewal_shows_on_the_following_invoice(
    stripe_target: StripeTarget,
) -> None:
    old, new = monthly(stripe_target, 1000), monthly(stripe_target, 2500)
    customer, subscription = subscribe(stripe_target, old)
    _, end = period(stripe_target, subscription.id)
    move_to(stripe_target, customer.id, end + AFTER_RENEWAL)
    stripe_target.client.v1.subscriptions.update(
        subscription.id,
        params={
            "items": [{"id": item_of(subscription).id, "price": new.id}],
            "proration_behavior": "none",
        },
    )
    renewal = latest_invoice(stripe_target, subscription.id)
    _, next_end = period(stripe_target, subscription.id)

    move_to(stripe_target, customer.id, next_end + AFTER_RENEWAL)

    following = latest_invoice(stripe_target, subscription.id)
    assert [(line.amount, price_of(line)) for line in renewal.lines.data] == [(1000, old.id)]
    assert following.id != renewal.id
    assert following.billing_reason == "subscription_cycle"
    assert [(line.amount, price_of(line)) for line in following.lines.data] == [(2500, new.id)]


def test_a_long_time_away_renews_and_invoices_every_period_in_between(
    stripe_target: StripeTarget,
) -> None:
    customer, subscription = subscribe(
        stripe_target, stripe_target.price(unit_amount=700, recurring={"interval": "week"})
    )
    start, _ = period(stripe_target, subscription.id)

    # One jump on the emulator; a test clock moves at most two intervals at a time.
    for days in [21] if stripe_target.is_emulator else [7, 14, 21]:
        move_to(stripe_target, customer.id, start + days * DAY + AFTER_RENEWAL)

    listed = invoices(stripe_target, subscription.id)
    assert [invoice.billing_reason for invoice in listed] == [
        "subscription_cycle",
        "subscription_cycle",
        "subscription_cycle",
        "subscription_create",
    ]
    assert [invoice.lines.data[0].period.start for invoice in listed] == [
        start + 21 * DAY,
        start + 14 * DAY,
        start + 7 * DAY,
        start,
    ]
    assert {invoice.status for invoice in listed} == {"paid"}


def test_invoices_are_listed_by_subscription_and_by_customer(
    stripe_target: StripeTarget,
) -> None:
    customer, first = subscribe(stripe_target, monthly(stripe_target, 1000))
    _, second = subscribe(stripe_target, monthly(stripe_target, 2000), customer=customer)
    _, stranger = subscribe(stripe_target, monthly(stripe_target, 3000))
    invoices_api = stripe_target.client.v1.invoices

    by_subscription = invoices_api.list(params={"subscription": first.id})
    by_customer = invoices_api.list(params={"customer": customer.id})
    paid = invoices_api.list(params={"customer": customer.id, "status": "paid"})
    page = invoices_api.list(params={"customer": customer.id, "limit": 1})

    assert [invoice.total for invoice in by_subscription.data] == [1000]
    assert [invoice.total for invoice in by_customer.data] == [2000, 1000]  # newest first
    assert [invoice.id for invoice in paid.data] == [invoice.id for invoice in by_customer.data]
    assert stranger.latest_invoice not in {invoice.id for invoice in by_customer.data}
    assert page.has_more is True
    assert [i.id for i in page.auto_paging_iter()] == [i.id for i in by_customer.data]
    assert second.latest_invoice == by_customer.data[0].id


def test_an_invoice_is_retrieved_by_id_and_a_missing_one_is_a_404(
    stripe_target: StripeTarget,
) -> None:
    _, subscription = subscribe(stripe_target, monthly(stripe_target, 1000))
    assert isinstance(subscription.latest_invoice, str)

    fetched = stripe_target.client.v1.invoices.retrieve(subscription.latest_invoice)
    with pytest.raises(stripe.InvalidRequestError) as raised:
        stripe_target.client.v1.invoices.retrieve("in_missing0000000000000000")

    assert fetched.id == subscription.latest_invoice
    assert raised.value.http_status == 404
    assert raised.value.code == "resource_missing"
    assert raised.value.param == "id"


def test_an_invoices_lines_are_listed_and_its_subscription_expands_it(
    stripe_target: StripeTarget,
) -> None:
    price = monthly(stripe_target, 1500)
    _, subscription = subscribe(stripe_target, price)

    expanded = stripe_target.client.v1.subscriptions.retrieve(
        subscription.id, params={"expand": ["latest_invoice"]}
    )
    invoice = expanded.latest_invoice
    assert isinstance(invoice, stripe.Invoice)
    assert invoice.id is not None
    lines = stripe_target.client.v1.invoices.line_items.list(invoice.id)

    assert invoice.id == subscription.latest_invoice
    assert [line.id for line in lines.data] == [line.id for line in invoice.lines.data]
    assert amounts(invoice) == [(1500, False)]


def _listening(target: StripeTarget) -> None:
    """A webhook endpoint for ``invoice.created``: Stripe then holds renewal drafts a while."""
    url = "http://127.0.0.1:9/hook" if target.is_emulator else "https://example.com/hook"
    target.webhook_endpoint(url=url, enabled_events=["invoice.created"])


def test_with_webhook_endpoints_a_renewal_invoice_is_a_draft_before_it_is_charged(
    stripe_target: StripeTarget,
) -> None:
    _listening(stripe_target)
    customer, subscription = subscribe(stripe_target, monthly(stripe_target, 1200))
    _, end = period(stripe_target, subscription.id)

    move_to(stripe_target, customer.id, end + 60)
    draft = latest_invoice(stripe_target, subscription.id)
    status_then = stripe_target.client.v1.subscriptions.retrieve(subscription.id).status
    # Stripe finalizes an hour after the last webhook was delivered, or after 72 h of failed
    # deliveries (this endpoint answers nobody); so does the emulator when an attempt failed
    # (tests/emulator/test_webhook_delivery.py), and an hour after the renewal when a clock
    # advance jumps past deliveries not tried yet (they run on the wall clock).
    move_to(stripe_target, customer.id, end + 3 * DAY + 2 * HOUR)
    charged = stripe_target.client.v1.invoices.retrieve(draft.id or "")

    assert (draft.billing_reason, draft.status, draft.number) == (
        "subscription_cycle",
        "draft",
        None,
    )
    assert draft.total == 1200
    assert status_then == "active"
    assert charged.status == "paid"
    assert charged.amount_paid == 1200
    assert charged.status_transitions.finalized_at is not None
    assert charged.status_transitions.finalized_at >= end + HOUR


def test_a_sent_invoice_past_its_due_date_unpaid_makes_the_subscription_past_due(
    stripe_target: StripeTarget,
) -> None:
    customer, subscription = subscribe(
        stripe_target,
        monthly(stripe_target, 900),
        collection_method="send_invoice",
        days_until_due=7,
    )
    # Past any finalization delay (Stripe's holds a draft up to 72 h while webhooks fail).
    move_to(stripe_target, customer.id, subscription.created + 3 * DAY + 2 * HOUR)
    invoice = latest_invoice(stripe_target, subscription.id)
    assert invoice.due_date is not None

    move_to(stripe_target, customer.id, invoice.due_date - HOUR)
    before = stripe_target.client.v1.subscriptions.retrieve(subscription.id).status
    move_to(stripe_target, customer.id, invoice.due_date + HOUR)
    after = stripe_target.client.v1.subscriptions.retrieve(subscription.id).status

    assert invoice.status == "open"
    assert (before, after) == ("active", "past_due")
