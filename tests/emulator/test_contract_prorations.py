"""Prorations: Stripe's per-second arithmetic, when it is invoiced, and previews of it.

The proration times below are chosen inside periods whose length is a whole number of days, so
that the expected amounts are exact (a quarter of a period, half of one) and need no rounding
rule; the rounding itself is covered by the emulator's own tests. The proration time is always
in the past of the customer's clock: the clock is first moved past it.
"""

from __future__ import annotations

import pytest
import stripe  # noqa: TID251 - these tests exercise the emulator through the real SDK

from tests.emulator.billing_support import (
    AFTER_RENEWAL,
    DAY,
    amounts,
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


def _quarter_in(
    target: StripeTarget, amount: int, *, quantity: int = 1
) -> tuple[stripe.Customer, stripe.Subscription, int, tuple[int, int]]:
    """A monthly subscription, its clock moved half-way through the first period; answers the
    time a quarter into it (3/4 of the period left) and the period."""
    customer, subscription = subscribe(target, monthly(target, amount), quantity=quantity)
    start, end = period(target, subscription.id)
    move_to(target, customer.id, start + (end - start) // 2)
    return customer, subscription, start + (end - start) // 4, (start, end)


def _change(
    target: StripeTarget, subscription: stripe.Subscription, price: stripe.Price, **params: object
) -> stripe.Subscription:
    return target.client.v1.subscriptions.update(
        subscription.id,
        params={"items": [{"id": item_of(subscription).id, "price": price.id}], **params},  # type: ignore[arg-type]
    )


def test_create_prorations_waits_for_the_next_renewal_invoice(
    stripe_target: StripeTarget,
) -> None:
    customer, subscription, at, (_, end) = _quarter_in(stripe_target, 1000)
    pro = monthly(stripe_target, 2400)

    updated = _change(
        stripe_target, subscription, pro, proration_behavior="create_prorations", proration_date=at
    )
    pending = stripe_target.client.v1.invoice_items.list(
        params={"customer": customer.id, "pending": True}
    )
    move_to(stripe_target, customer.id, end + AFTER_RENEWAL)
    renewal = latest_invoice(stripe_target, subscription.id)

    assert updated.latest_invoice == subscription.latest_invoice  # nothing invoiced yet
    assert sorted(item.amount for item in pending.data) == [-750, 1800]
    assert all(item.proration for item in pending.data)
    assert renewal.billing_reason == "subscription_cycle"
    assert amounts(renewal) == [(-750, True), (1800, True), (2400, False)]
    assert renewal.total == 3450
    assert {
        (line.period.start, line.period.end) for line in renewal.lines.data if is_proration(line)
    } == {(at, end)}


def test_always_invoice_invoices_the_prorations_at_once_to_the_second(
    stripe_target: StripeTarget,
) -> None:
    _, subscription, at, (_, end) = _quarter_in(stripe_target, 1000)
    basic_id = price_of(latest_invoice(stripe_target, subscription.id).lines.data[0])
    pro = monthly(stripe_target, 2400)

    updated = _change(
        stripe_target, subscription, pro, proration_behavior="always_invoice", proration_date=at
    )
    invoice = latest_invoice(stripe_target, subscription.id)

    lines = sorted(invoice.lines.data, key=lambda line: line.amount)
    assert updated.latest_invoice != subscription.latest_invoice
    assert invoice.billing_reason == "subscription_update"
    assert invoice.status == "paid"
    assert [(line.amount, price_of(line)) for line in lines] == [(-750, basic_id), (1800, pro.id)]
    assert all(is_proration(line) for line in lines)
    assert all((line.period.start, line.period.end) == (at, end) for line in lines)
    assert lines[0].description is not None
    assert lines[0].description.startswith("Unused time")
    assert lines[1].description is not None
    assert lines[1].description.startswith("Remaining time")
    assert invoice.total == 1050


def test_a_quantity_change_credits_the_old_seats_and_charges_the_new(
    stripe_target: StripeTarget,
) -> None:
    _, subscription, at, _ = _quarter_in(stripe_target, 1000, quantity=2)

    stripe_target.client.v1.subscriptions.update(
        subscription.id,
        params={
            "items": [{"id": item_of(subscription).id, "quantity": 6}],
            "proration_behavior": "always_invoice",
            "proration_date": at,
        },
    )
    invoice = latest_invoice(stripe_target, subscription.id)

    assert sorted((line.amount, line.quantity) for line in invoice.lines.data) == [
        (-1500, 2),
        (4500, 6),
    ]


def test_a_preview_with_a_proration_date_matches_the_update_made_with_it_to_the_cent(
    stripe_target: StripeTarget,
) -> None:
    # Odd amounts and an odd instant: whatever the rounding, both must agree.
    customer, subscription = subscribe(stripe_target, monthly(stripe_target, 999), quantity=3)
    start, end = period(stripe_target, subscription.id)
    move_to(stripe_target, customer.id, start + 9 * 86_400)
    at = start + 7 * 86_400 + 12_345
    pro = monthly(stripe_target, 1999)
    item_id = item_of(subscription).id

    preview = stripe_target.client.v1.invoices.create_preview(
        params={
            "customer": customer.id,
            "subscription": subscription.id,
            "subscription_details": {
                "items": [{"id": item_id, "price": pro.id, "quantity": 5}],
                "proration_behavior": "always_invoice",
                "proration_date": at,
            },
        }
    )
    unchanged = stripe_target.client.v1.subscriptions.retrieve(subscription.id)
    stripe_target.client.v1.subscriptions.update(
        subscription.id,
        params={
            "items": [{"id": item_id, "price": pro.id, "quantity": 5}],
            "proration_behavior": "always_invoice",
            "proration_date": at,
        },
    )
    invoice = latest_invoice(stripe_target, subscription.id)

    assert amounts(preview) == amounts(invoice)
    assert (preview.total, preview.amount_due) == (invoice.total, invoice.amount_due)
    assert len(preview.lines.data) == 2
    assert unchanged.latest_invoice == subscription.latest_invoice
    assert item_of(unchanged).price.id != pro.id
    assert (at, end) in {(line.period.start, line.period.end) for line in preview.lines.data}


def test_a_preview_of_the_default_behavior_is_the_next_renewal_with_the_prorations(
    stripe_target: StripeTarget,
) -> None:
    _customer, subscription, at, (_, end) = _quarter_in(stripe_target, 1000)
    pro = monthly(stripe_target, 2400)

    preview = stripe_target.client.v1.invoices.create_preview(
        params={
            "subscription": subscription.id,
            "subscription_details": {
                "items": [{"id": item_of(subscription).id, "price": pro.id}],
                "proration_date": at,
            },
        }
    )

    assert preview.billing_reason == "subscription_cycle"
    assert amounts(preview) == [(-750, True), (1800, True), (2400, False)]
    renewal = next(line for line in preview.lines.data if not is_proration(line))
    assert renewal.period.start == end
    assert len(invoices(stripe_target, subscription.id)) == 1


def test_moving_to_a_yearly_price_invoices_the_year_at_once_with_a_credit_for_the_month(
    stripe_target: StripeTarget,
) -> None:
    customer, subscription = subscribe(stripe_target, monthly(stripe_target, 1000))
    start, end = period(stripe_target, subscription.id)
    half = start + (end - start) // 2
    move_to(stripe_target, customer.id, half)
    yearly = stripe_target.price(unit_amount=12_000, recurring={"interval": "year"})

    _change(
        stripe_target,
        subscription,
        yearly,
        proration_behavior="always_invoice",
        proration_date=half,
    )
    invoice = latest_invoice(stripe_target, subscription.id)
    new_start, new_end = period(stripe_target, subscription.id)

    credits = [line for line in invoice.lines.data if is_proration(line)]
    full = [line for line in invoice.lines.data if not is_proration(line)]
    assert invoice.billing_reason == "subscription_update"
    assert [line.amount for line in credits] == [-500]
    assert [(line.amount, price_of(line)) for line in full] == [(12_000, yearly.id)]
    assert invoice.total == 11_500
    assert new_end - new_start >= 365 * 86_400
    assert (full[0].period.start, full[0].period.end) == (new_start, new_end)


def test_moving_to_a_yearly_price_without_proration_invoices_the_year_and_credits_nothing(
    stripe_target: StripeTarget,
) -> None:
    customer, subscription = subscribe(stripe_target, monthly(stripe_target, 1000))
    start, end = period(stripe_target, subscription.id)
    move_to(stripe_target, customer.id, start + (end - start) // 2)
    yearly = stripe_target.price(unit_amount=12_000, recurring={"interval": "year"})

    _change(stripe_target, subscription, yearly, proration_behavior="none")
    invoice = latest_invoice(stripe_target, subscription.id)

    assert invoice.billing_reason == "subscription_update"
    assert amounts(invoice) == [(12_000, False)]


def test_proration_behavior_none_invoices_nothing(stripe_target: StripeTarget) -> None:
    customer, subscription, _at, _ = _quarter_in(stripe_target, 1000)

    _change(stripe_target, subscription, monthly(stripe_target, 2400), proration_behavior="none")
    pending = stripe_target.client.v1.invoice_items.list(
        params={"customer": customer.id, "pending": True}
    )

    assert latest_invoice(stripe_target, subscription.id).id == subscription.latest_invoice
    assert pending.data == []


def test_a_proration_date_outside_the_current_period_is_refused_naming_it(
    stripe_target: StripeTarget,
) -> None:
    _customer, subscription = subscribe(stripe_target, monthly(stripe_target, 1000))
    _, end = period(stripe_target, subscription.id)

    with pytest.raises(stripe.InvalidRequestError) as raised:
        _change(
            stripe_target, subscription, monthly(stripe_target, 2400), proration_date=end + 86_400
        )

    assert raised.value.http_status == 400
    assert raised.value.param == "proration_date"


# Flexible billing mode (the default on our API version): a credit gives back what was debited
# for the time credited, one credit per debit, and nothing where nothing was debited.


def _credits(invoice: stripe.Invoice) -> list[int]:
    return sorted(
        line.amount for line in invoice.lines.data if is_proration(line) and line.amount < 0
    )


def test_in_a_period_cut_short_by_cancel_at_a_credit_never_exceeds_what_was_billed(
    stripe_target: StripeTarget,
) -> None:
    customer, subscription = subscribe(stripe_target, monthly(stripe_target, 2900))
    _, end = period(stripe_target, subscription.id)
    cut = end + 2 * DAY  # the next period is two days long, billed pro rata
    stripe_target.client.v1.subscriptions.update(subscription.id, params={"cancel_at": cut})
    at = end + DAY  # half of that short period is left
    move_to(stripe_target, customer.id, at)
    renewal = latest_invoice(stripe_target, subscription.id)
    (billed,) = [line.amount for line in renewal.lines.data if not is_proration(line)]

    _change(
        stripe_target,
        subscription,
        monthly(stripe_target, 900),
        proration_behavior="always_invoice",
        proration_date=at,
    )

    assert renewal.billing_reason == "subscription_cycle"
    assert 0 < billed < 2900
    assert _credits(latest_invoice(stripe_target, subscription.id)) == [-((billed + 1) // 2)]


@pytest.mark.parametrize(("mode", "credits"), [("flexible", []), ("classic", [-1000])])
def test_removing_an_item_that_was_never_debited_credits_nothing_in_flexible_mode_only(
    stripe_target: StripeTarget, mode: str, credits: list[int]
) -> None:
    customer, subscription = subscribe(
        stripe_target, monthly(stripe_target, 1000), billing_mode={"type": mode}
    )
    start, end = period(stripe_target, subscription.id)
    added = stripe_target.client.v1.subscriptions.update(
        subscription.id,
        params={
            "items": [{"price": monthly(stripe_target, 2000).id}],
            "proration_behavior": "none",  # the added seat is not debited for this period
        },
    )
    extra = next(item for item in added["items"].data if item.id != item_of(subscription).id)
    half = start + (end - start) // 2
    move_to(stripe_target, customer.id, half)

    stripe_target.client.v1.subscriptions.update(
        subscription.id,
        params={
            "items": [{"id": extra.id, "deleted": True}],
            "proration_behavior": "create_prorations",
            "proration_date": half,
        },
    )
    pending = stripe_target.client.v1.invoice_items.list(
        params={"customer": customer.id, "pending": True}
    )

    assert sorted(item.amount for item in pending.data) == credits
