"""How the emulator bills, in the details real Stripe cannot be pinned to in a contract test:
the rounding rule, descriptions, numbering, balances, previews, pending updates' expiry,
``send_invoice`` due dates, ``default_incomplete`` and ``cancel_at`` periods."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
import stripe  # noqa: TID251 - these tests exercise the emulator through the real SDK

from stripe_emulator import EmulatorAdmin
from stripe_emulator.invoicing import TIMES
from stripe_emulator.rounding import prorate
from tests.emulator.billing_support import amounts, details, is_proration, item_of, latest_invoice
from tests.emulator.support import StripeTarget

pytestmark = pytest.mark.emulator_only

DAY = 86_400


@pytest.fixture
def target(emulator_client: stripe.StripeClient, admin: EmulatorAdmin) -> StripeTarget:
    return StripeTarget("emulator", emulator_client, admin)


def _price(client: stripe.StripeClient, amount: int, **params: Any) -> stripe.Price:
    params.setdefault("currency", "usd")
    params.setdefault("recurring", {"interval": "month"})
    return client.v1.prices.create(
        params={"unit_amount": amount, "product_data": {"name": "Plan"}, **params}  # type: ignore[typeddict-item]
    )


def _subscribe(
    client: stripe.StripeClient, price: stripe.Price, **params: Any
) -> stripe.Subscription:
    customer = client.v1.customers.create(params={"name": "Billed"})
    return client.v1.subscriptions.create(
        params={"customer": customer.id, "items": [{"price": price.id}], **params}  # type: ignore[arg-type]
    )


def _change(
    client: stripe.StripeClient, subscription: stripe.Subscription, **params: Any
) -> stripe.Subscription:
    return client.v1.subscriptions.update(subscription.id, params=params)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("amount", "remaining", "length", "expected"),
    [
        (1000, 1, 2, 500),
        (1001, 1, 2, 501),  # 500.5: halves go away from zero
        (-1001, 1, 2, -501),
        (999, 1, 3, 333),
        (1000, 2, 3, 667),
        (1000, 0, 30, 0),
        (1000, 30, 30, 1000),
    ],
)
def test_a_proration_is_rounded_to_the_nearest_minor_unit_halves_away_from_zero(
    amount: int, remaining: int, length: int, expected: int
) -> None:
    assert prorate(amount, remaining, length) == expected
    assert prorate(amount, remaining, length) == prorate(amount, remaining, length)


def test_an_update_prorates_each_line_with_that_rule(
    emulator_client: stripe.StripeClient,
) -> None:
    subscription = _subscribe(emulator_client, _price(emulator_client, 1001))
    item = item_of(subscription)
    start, end = item.current_period_start, item.current_period_end
    at = start + (end - start) // 2  # half of 1001 and of 2003: two halves to round

    _change(
        emulator_client,
        subscription,
        items=[{"id": item.id, "price": _price(emulator_client, 2003).id}],
        proration_behavior="always_invoice",
        proration_date=at,
    )

    invoice = latest_invoice(StripeTarget("emulator", emulator_client, None), subscription.id)
    assert amounts(invoice) == [(-501, True), (1002, True)]


def test_lines_are_described_as_stripe_describes_them(
    emulator_client: stripe.StripeClient,
) -> None:
    yen = _price(emulator_client, 500, currency="jpy")
    subscription = _subscribe(emulator_client, yen)
    item = item_of(subscription)
    at = item.current_period_start + 3600
    quarter = {"interval": "month", "interval_count": 3}
    other = _price(emulator_client, 800, currency="jpy", recurring=quarter)
    quarterly = emulator_client.v1.subscriptions.create(
        params={
            "customer": str(subscription.customer),
            "items": [{"price": other.id, "quantity": 2}],
        }
    )
    _change(
        emulator_client,
        subscription,
        items=[{"id": item.id, "quantity": 4}],
        proration_behavior="always_invoice",
        proration_date=at,
    )

    target = StripeTarget("emulator", emulator_client, None)
    first = latest_invoice(target, quarterly.id).lines.data[0]
    update = latest_invoice(target, subscription.id).lines.data
    day = datetime.fromtimestamp(at, UTC)
    after = f"after {day.day} {day:%b} {day.year}"
    assert first.description == f"2 {TIMES} Plan (at ¥800 / every 3 months)"
    assert [line.description for line in update] == [
        f"Unused time on Plan {after}",
        f"Remaining time on 4 {TIMES} Plan {after}",
    ]


def test_invoices_are_numbered_from_the_customers_prefix_and_sequence(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    customer = emulator_client.v1.customers.create(
        params={"invoice_prefix": "ACME", "next_invoice_sequence": 41}
    )
    price = _price(emulator_client, 100)
    emulator_client.v1.subscriptions.create(
        params={"customer": customer.id, "items": [{"price": price.id}]}
    )
    admin.advance_clock("32d")

    listed = emulator_client.v1.invoices.list(params={"customer": customer.id})

    assert [invoice.number for invoice in listed.data] == ["ACME-0042", "ACME-0041"]
    assert emulator_client.v1.customers.retrieve(customer.id).next_invoice_sequence == 43


def test_a_negative_total_credits_the_customers_balance_which_the_next_invoice_uses(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    subscription = _subscribe(emulator_client, _price(emulator_client, 3000))
    item = item_of(subscription)
    start, end = item.current_period_start, item.current_period_end
    cheaper = _price(emulator_client, 1000)

    _change(
        emulator_client,
        subscription,
        items=[{"id": item.id, "price": cheaper.id}],
        proration_behavior="always_invoice",
        proration_date=start + (end - start) // 2,
    )
    target = StripeTarget("emulator", emulator_client, None)
    downgrade = latest_invoice(target, subscription.id)
    balance = emulator_client.v1.customers.retrieve(str(subscription.customer)).balance
    admin.set_time(end + 60)
    renewal = latest_invoice(target, subscription.id)

    assert (downgrade.total, downgrade.amount_due, downgrade.status) == (-1000, 0, "paid")
    assert (downgrade.starting_balance, downgrade.ending_balance) == (0, -1000)
    assert balance == -1000
    assert (renewal.total, renewal.starting_balance, renewal.amount_due) == (1000, -1000, 0)
    assert renewal.status == "paid"
    assert emulator_client.v1.customers.retrieve(str(subscription.customer)).balance == 0


def test_an_invoice_sent_to_the_customer_is_open_with_its_due_date_and_never_charged(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    subscription = _subscribe(
        emulator_client,
        _price(emulator_client, 900),
        collection_method="send_invoice",
        days_until_due=14,
    )
    target = StripeTarget("emulator", emulator_client, None)
    invoice = latest_invoice(target, subscription.id)

    admin.advance_clock("14d1m")
    later = emulator_client.v1.invoices.retrieve(invoice.id or "")

    assert invoice.status == "open"
    assert invoice.due_date == invoice.created + 14 * DAY
    assert (later.status, later.attempted, later.attempt_count) == ("open", False, 0)


def test_a_sent_invoice_unpaid_by_its_due_date_makes_the_subscription_past_due_until_paid(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    subscription = _subscribe(
        emulator_client,
        _price(emulator_client, 900),
        collection_method="send_invoice",
        days_until_due=14,
    )
    invoice = latest_invoice(StripeTarget("emulator", emulator_client, None), subscription.id)
    assert invoice.due_date is not None
    assert invoice.id is not None
    admin.set_time(invoice.due_date - 60)
    before = emulator_client.v1.subscriptions.retrieve(subscription.id).status

    admin.set_time(invoice.due_date)
    overdue = emulator_client.v1.subscriptions.retrieve(subscription.id).status
    emulator_client.v1.invoices.pay(invoice.id, params={"paid_out_of_band": True})
    paid = emulator_client.v1.subscriptions.retrieve(subscription.id).status

    assert (before, overdue, paid) == ("active", "past_due", "active")


def test_a_preview_is_an_upcoming_invoice_that_creates_nothing(
    emulator_client: stripe.StripeClient,
) -> None:
    subscription = _subscribe(emulator_client, _price(emulator_client, 1000))
    item = item_of(subscription)

    preview = emulator_client.v1.invoices.create_preview(
        params={
            "subscription": subscription.id,
            "subscription_details": {
                "items": [{"id": item.id, "price": _price(emulator_client, 2000).id}],
                "proration_behavior": "always_invoice",
            },
        }
    )

    assert preview.id is not None
    assert preview.id.startswith("upcoming_in_")
    assert {line.id[:7] for line in preview.lines.data if line.id} == {"il_tmp_"}
    assert preview.status == "draft"
    assert preview.number is None
    assert [i.id for i in emulator_client.v1.invoices.list().data] == [subscription.latest_invoice]
    assert emulator_client.v1.invoice_items.list().data == []
    assert item_of(emulator_client.v1.subscriptions.retrieve(subscription.id)).price.id == (
        item.price.id
    )


def test_a_preview_names_its_proration_date_when_outside_the_period(
    emulator_client: stripe.StripeClient,
) -> None:
    subscription = _subscribe(emulator_client, _price(emulator_client, 1000))

    with pytest.raises(stripe.InvalidRequestError) as raised:
        emulator_client.v1.invoices.create_preview(
            params={
                "subscription": subscription.id,
                "subscription_details": {"proration_date": subscription.created - DAY},
            }
        )

    assert raised.value.param == "subscription_details[proration_date]"


def test_a_change_during_a_trial_prorates_nothing(emulator_client: stripe.StripeClient) -> None:
    subscription = _subscribe(emulator_client, _price(emulator_client, 1000), trial_period_days=7)

    _change(
        emulator_client,
        subscription,
        items=[{"id": item_of(subscription).id, "price": _price(emulator_client, 5000).id}],
        proration_behavior="always_invoice",
    )

    assert emulator_client.v1.invoice_items.list().data == []
    assert len(emulator_client.v1.invoices.list().data) == 1


def test_adding_an_item_charges_its_remaining_time_and_removing_one_credits_it(
    emulator_client: stripe.StripeClient,
) -> None:
    subscription = _subscribe(emulator_client, _price(emulator_client, 1000))
    item = item_of(subscription)
    at = item.current_period_start + (item.current_period_end - item.current_period_start) // 2
    extra = _price(emulator_client, 400)
    target = StripeTarget("emulator", emulator_client, None)

    added = _change(
        emulator_client,
        subscription,
        items=[{"price": extra.id}],
        proration_behavior="always_invoice",
        proration_date=at,
    )
    charged = latest_invoice(target, subscription.id)
    _change(
        emulator_client,
        subscription,
        items=[{"id": item.id, "deleted": True}],
        proration_behavior="always_invoice",
        proration_date=at,
    )
    credited = latest_invoice(target, subscription.id)

    assert len(added["items"].data) == 2
    assert amounts(charged) == [(200, True)]
    assert amounts(credited) == [(-500, True)]


def test_resetting_the_billing_cycle_anchor_invoices_a_new_period_now(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    subscription = _subscribe(emulator_client, _price(emulator_client, 1000))
    admin.advance_clock("10d")

    reset = _change(
        emulator_client,
        subscription,
        billing_cycle_anchor={"type": "now"},
        proration_behavior="none",
    )

    invoice = latest_invoice(StripeTarget("emulator", emulator_client, None), subscription.id)
    assert reset.billing_cycle_anchor >= subscription.billing_cycle_anchor + 10 * DAY
    assert item_of(reset).current_period_start == reset.billing_cycle_anchor
    assert amounts(invoice) == [(1000, False)]


def test_default_incomplete_makes_the_update_without_attempting_payment(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    subscription = _subscribe(emulator_client, _price(emulator_client, 1000))
    admin.fail_payments(str(subscription.customer))

    updated = _change(
        emulator_client,
        subscription,
        items=[{"id": item_of(subscription).id, "price": _price(emulator_client, 2000).id}],
        proration_behavior="always_invoice",
        payment_behavior="default_incomplete",
    )
    invoice = latest_invoice(StripeTarget("emulator", emulator_client, None), subscription.id)
    admin.succeed_payments(str(subscription.customer))

    assert updated.status == "past_due"
    assert (invoice.status, invoice.attempted) == ("open", False)
    assert emulator_client.v1.subscriptions.retrieve(subscription.id).status == "active"


def test_a_pending_update_expires_after_23_hours_and_its_invoice_is_voided(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    subscription = _subscribe(emulator_client, _price(emulator_client, 1000))
    admin.fail_payments(str(subscription.customer))
    held = _change(
        emulator_client,
        subscription,
        items=[{"id": item_of(subscription).id, "price": _price(emulator_client, 2000).id}],
        proration_behavior="always_invoice",
        payment_behavior="pending_if_incomplete",
        metadata={"plan": "pro"},
    )
    assert held.pending_update is not None
    assert isinstance(held.latest_invoice, str)

    admin.advance_clock("23h1m")
    expired = emulator_client.v1.subscriptions.retrieve(subscription.id)

    assert held.pending_update.metadata is not None
    assert held.pending_update.metadata.to_dict() == {"plan": "pro"}
    assert held.pending_update.expires_at <= held.created + 23 * 3600 + 60
    assert expired.pending_update is None
    assert expired.metadata.to_dict() == {}
    assert item_of(expired).price.id == item_of(subscription).price.id
    assert emulator_client.v1.invoices.retrieve(held.latest_invoice).status == "void"


def test_a_cancel_at_inside_the_period_ends_the_period_there(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    subscription = _subscribe(emulator_client, _price(emulator_client, 1000))
    cancel_at = item_of(subscription).current_period_start + 5 * DAY

    scheduled = _change(emulator_client, subscription, cancel_at=cancel_at)
    admin.set_time(cancel_at + 1)

    assert item_of(scheduled).current_period_end == cancel_at
    assert emulator_client.v1.subscriptions.retrieve(subscription.id).status == "canceled"
    assert len(emulator_client.v1.invoices.list().data) == 1


def test_a_later_cancel_at_bills_its_last_period_pro_rata(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    thirty_days = {"interval": "day", "interval_count": 30}
    subscription = _subscribe(emulator_client, _price(emulator_client, 3000, recurring=thirty_days))
    start = item_of(subscription).current_period_start
    cancel_at = start + 40 * DAY

    _change(emulator_client, subscription, cancel_at=cancel_at)
    admin.set_time(start + 30 * DAY + 60)
    last = latest_invoice(StripeTarget("emulator", emulator_client, None), subscription.id)

    assert [(line.amount, line.period.end) for line in last.lines.data] == [(1000, cancel_at)]
    assert not any(is_proration(line) for line in last.lines.data)


def test_an_invoice_embeds_ten_lines_and_pages_through_all(
    emulator_client: stripe.StripeClient,
) -> None:
    prices = [_price(emulator_client, 100 * (n + 1)) for n in range(12)]
    customer = emulator_client.v1.customers.create()
    subscription = emulator_client.v1.subscriptions.create(
        params={"customer": customer.id, "items": [{"price": price.id} for price in prices]}
    )
    assert isinstance(subscription.latest_invoice, str)

    invoice = emulator_client.v1.invoices.retrieve(subscription.latest_invoice)
    lines = emulator_client.v1.invoices.line_items.list(invoice.id or "", params={"limit": 5})

    assert (len(invoice.lines.data), invoice.lines.has_more) == (10, True)
    assert invoice.total == sum(100 * (n + 1) for n in range(12))
    assert len(list(lines.auto_paging_iter())) == 12


def test_an_invoice_expands_its_lines_prices_and_its_subscription(
    emulator_client: stripe.StripeClient,
) -> None:
    price = _price(emulator_client, 1000)
    subscription = _subscribe(emulator_client, price)
    assert isinstance(subscription.latest_invoice, str)

    invoice = emulator_client.v1.invoices.retrieve(
        subscription.latest_invoice,
        params={
            "expand": [
                "lines.data.pricing.price_details.price",
                "parent.subscription_details.subscription",
                "customer",
            ]
        },
    )

    details = invoice.lines.data[0].pricing
    assert details is not None
    assert details.price_details is not None
    assert isinstance(details.price_details.price, stripe.Price)
    assert details.price_details.price.id == price.id
    assert invoice.parent is not None
    assert invoice.parent.subscription_details is not None
    assert isinstance(invoice.parent.subscription_details.subscription, stripe.Subscription)
    assert isinstance(invoice.customer, stripe.Customer)


def test_a_voided_invoice_gives_back_the_balance_it_used(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    customer = emulator_client.v1.customers.create(params={"balance": -2000})
    subscription = emulator_client.v1.subscriptions.create(
        params={"customer": customer.id, "items": [{"price": _price(emulator_client, 1000).id}]}
    )
    admin.fail_payments(customer.id)
    held = _change(
        emulator_client,
        subscription,
        items=[{"id": item_of(subscription).id, "quantity": 5}],
        proration_behavior="always_invoice",
        payment_behavior="pending_if_incomplete",
    )
    assert isinstance(held.latest_invoice, str)
    left = emulator_client.v1.customers.retrieve(customer.id).balance

    admin.advance_clock("1d")

    assert subscription.status == "active"  # the first invoice took 1000 of the credit
    assert left == 0  # the upgrade's invoice took the rest
    assert emulator_client.v1.invoices.retrieve(held.latest_invoice).status == "void"
    assert emulator_client.v1.customers.retrieve(customer.id).balance == -1000


def test_a_cancel_at_period_end_follows_the_period_when_the_cycle_restarts(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    subscription = _subscribe(emulator_client, _price(emulator_client, 1000))
    _change(emulator_client, subscription, cancel_at_period_end=True)
    admin.advance_clock("5d")
    yearly = _price(emulator_client, 9000, recurring={"interval": "year"})

    moved = _change(
        emulator_client,
        subscription,
        items=[{"id": item_of(subscription).id, "price": yearly.id}],
        proration_behavior="none",
    )

    end = item_of(moved).current_period_end
    assert end - item_of(moved).current_period_start >= 365 * DAY
    assert (moved.cancel_at, moved.cancel_at_period_end) == (end, True)


def test_a_new_interval_during_a_trial_applies_to_the_paid_periods_after_it(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    subscription = _subscribe(emulator_client, _price(emulator_client, 1000), trial_period_days=7)
    yearly = _price(emulator_client, 9000, recurring={"interval": "year"})

    trialing = _change(
        emulator_client,
        subscription,
        items=[{"id": item_of(subscription).id, "price": yearly.id}],
    )
    admin.advance_clock("7d1m")
    paid = emulator_client.v1.subscriptions.retrieve(subscription.id)

    assert item_of(trialing).current_period_end == subscription.trial_end
    assert paid.status == "active"
    assert item_of(paid).current_period_end - item_of(paid).current_period_start >= 365 * DAY
    assert amounts(latest_invoice(StripeTarget("emulator", emulator_client, None), paid.id)) == [
        (9000, False)
    ]


def _credit_lines(invoice: stripe.Invoice) -> list[tuple[int, int, int]]:
    """Each credit proration's amount and period."""
    return sorted(
        (line.amount, line.period.start, line.period.end)
        for line in invoice.lines.data
        if is_proration(line) and line.amount < 0
    )


@pytest.mark.parametrize(("mode", "expected"), [("flexible", "per debit"), ("classic", "list")])
def test_a_credit_over_time_billed_by_two_debits_is_one_credit_per_debit_in_flexible_mode(
    emulator_client: stripe.StripeClient, mode: str, expected: str
) -> None:
    subscription = _subscribe(
        emulator_client, _price(emulator_client, 1000), billing_mode={"type": mode}
    )
    item = item_of(subscription)
    start, end = item.current_period_start, item.current_period_end
    eighth = (end - start) // 8
    upgraded_at, credited_from = start + 2 * eighth, start + eighth
    _change(  # 1000 for [start, end], then 2000 for [start + 1/4, end]: two debits
        emulator_client,
        subscription,
        items=[{"id": item.id, "price": _price(emulator_client, 2000).id}],
        proration_behavior="always_invoice",
        proration_date=upgraded_at,
    )
    upgrade = latest_invoice(StripeTarget("emulator", emulator_client, None), subscription.id)
    (debit,) = [line for line in upgrade.lines.data if line.amount > 0]

    _change(  # back to 1000, prorated from an eighth into the period
        emulator_client,
        subscription,
        items=[{"id": item.id, "price": _price(emulator_client, 1000).id}],
        proration_behavior="always_invoice",
        proration_date=credited_from,
    )

    invoice = latest_invoice(StripeTarget("emulator", emulator_client, None), subscription.id)
    if expected == "per debit":  # the first period's eighth left uncredited, and the upgrade
        assert _credit_lines(invoice) == [
            (-1500, upgraded_at, end),
            (-125, credited_from, upgraded_at),
        ]
        (credit,) = [line for line in invoice.lines.data if line.amount == -1500]
        assert details(credit).proration_details.credited_items.to_dict() == {
            "invoice": upgrade.id,
            "invoice_line_items": [debit.id],
        }
    else:  # the new price's unused time, whatever was billed
        assert _credit_lines(invoice) == [(-1750, credited_from, end)]


def test_without_webhook_endpoints_a_renewal_invoice_is_finalized_and_charged_at_once(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    subscription = _subscribe(emulator_client, _price(emulator_client, 1200))
    end = item_of(subscription).current_period_end

    admin.set_time(end + 1)
    renewal = latest_invoice(StripeTarget("emulator", emulator_client, None), subscription.id)

    assert (renewal.billing_reason, renewal.status) == ("subscription_cycle", "paid")
    assert renewal.status_transitions.finalized_at == end
    assert renewal.automatically_finalizes_at is None


def test_a_pending_update_dropped_unpaid_leaves_nothing_to_credit_but_the_first_debit(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    subscription = _subscribe(emulator_client, _price(emulator_client, 1000))
    item = item_of(subscription)
    start, end = item.current_period_start, item.current_period_end
    admin.fail_payments(str(subscription.customer))
    _change(  # an upgrade whose invoice is never paid: dropped after 23 h, its invoice voided
        emulator_client,
        subscription,
        items=[{"id": item.id, "price": _price(emulator_client, 2000).id}],
        proration_behavior="always_invoice",
        payment_behavior="pending_if_incomplete",
    )
    half = start + (end - start) // 2
    admin.set_time(half)
    admin.succeed_payments(str(subscription.customer))  # nothing left to pay

    _change(
        emulator_client,
        subscription,
        items=[{"id": item.id, "price": _price(emulator_client, 500).id}],
        proration_behavior="always_invoice",
        proration_date=half,
    )

    invoice = latest_invoice(StripeTarget("emulator", emulator_client, None), subscription.id)
    assert _credit_lines(invoice) == [(-500, half, end)]
