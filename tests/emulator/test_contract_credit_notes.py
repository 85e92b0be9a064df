"""Credit notes: what crediting a finalized invoice does to the invoice and to the customer's
balance.

A credit note first lowers the invoice's amount remaining (and amount due), never below 0:
its pre-payment amount; an open invoice left with nothing to pay is paid. The rest, all of it
on a paid invoice, is its post-payment amount, which must be given exactly to the customer's
balance (``credit_amount``), a refund (``refund_amount``) or credit outside Stripe
(``out_of_band_amount``). An invoice's credit notes never credit more than its total; only an
open or paid invoice can be credited, and only a credit note of an open invoice voided.
(https://docs.stripe.com/api/credit_notes/create,
https://docs.stripe.com/invoicing/dashboard/credit-notes,
https://docs.stripe.com/invoicing/integration/programmatic-credit-notes,
https://docs.stripe.com/changelog/2019-12-03/post-payment-credit-note-requirement)"""

from __future__ import annotations

from typing import Any

import pytest
import stripe  # noqa: TID251 - these tests exercise the emulator through the real SDK

from tests.emulator.billing_support import (
    AFTER_RENEWAL,
    latest_invoice,
    monthly,
    move_to,
    open_invoice,
    paid_invoice,
    period,
    subscribe,
)
from tests.emulator.support import StripeTarget


def _credit(target: StripeTarget, invoice: stripe.Invoice, **params: Any) -> stripe.CreditNote:
    return target.client.v1.credit_notes.create(
        params={"invoice": invoice.id or "", **params}  # type: ignore[typeddict-item]
    )


def _invoice(target: StripeTarget, invoice: stripe.Invoice) -> stripe.Invoice:
    return target.client.v1.invoices.retrieve(invoice.id or "")


def _balance(target: StripeTarget, customer_id: str) -> int:
    return int(target.client.v1.customers.retrieve(customer_id).balance or 0)


def _due(invoice: stripe.Invoice) -> tuple[str | None, int, int, int, int, int]:
    return (
        invoice.status,
        invoice.total,
        invoice.amount_due,
        invoice.amount_remaining,
        invoice.pre_payment_credit_notes_amount,
        invoice.post_payment_credit_notes_amount,
    )


def test_a_credit_note_on_an_open_invoice_lowers_what_is_due(
    stripe_target: StripeTarget,
) -> None:
    customer, _, invoice = open_invoice(stripe_target, 1000)

    note = _credit(stripe_target, invoice, amount=300, reason="order_change", memo="Late")

    assert (note.status, note.type, note.amount, note.total, note.subtotal) == (
        "issued",
        "pre_payment",
        300,
        300,
        300,
    )
    assert (note.pre_payment_amount, note.post_payment_amount) == (300, 0)
    assert (note.reason, note.memo, note.customer, note.invoice) == (
        "order_change",
        "Late",
        customer.id,
        invoice.id,
    )
    assert note.number == f"{invoice.number}-CN-01"
    assert note.customer_balance_transaction is None
    assert _due(_invoice(stripe_target, invoice)) == ("open", 1000, 700, 700, 300, 0)
    assert _balance(stripe_target, customer.id) == 0


def test_a_credit_note_for_all_that_an_open_invoice_owes_marks_it_paid(
    stripe_target: StripeTarget,
) -> None:
    _, _, invoice = open_invoice(stripe_target, 1000)

    _credit(stripe_target, invoice, amount=1000)
    credited = _invoice(stripe_target, invoice)

    assert _due(credited) == ("paid", 1000, 0, 0, 1000, 0)
    assert credited.amount_paid == 0


def test_a_credit_note_on_a_paid_invoice_credits_the_balance_which_the_next_invoice_takes(
    stripe_target: StripeTarget,
) -> None:
    customer, subscription, invoice = paid_invoice(stripe_target, 1000)

    note = _credit(stripe_target, invoice, amount=400, credit_amount=400)
    balance_then = _balance(stripe_target, customer.id)
    credited = _invoice(stripe_target, invoice)
    _, end = period(stripe_target, subscription.id)
    move_to(stripe_target, customer.id, end + AFTER_RENEWAL)
    renewal = latest_invoice(stripe_target, subscription.id)

    assert (note.type, note.pre_payment_amount, note.post_payment_amount) == (
        "post_payment",
        0,
        400,
    )
    assert note.customer_balance_transaction is not None
    assert note.out_of_band_amount is None
    assert note.refunds == []
    assert _due(credited) == ("paid", 1000, 1000, 0, 0, 400)
    assert credited.amount_paid == 1000
    assert balance_then == -400
    assert (renewal.starting_balance, renewal.amount_due, renewal.ending_balance) == (-400, 600, 0)
    assert _balance(stripe_target, customer.id) == 0


def test_a_credit_note_on_a_paid_invoice_must_say_where_all_its_money_goes(
    stripe_target: StripeTarget,
) -> None:
    customer, _, invoice = paid_invoice(stripe_target, 1000)

    with pytest.raises(stripe.InvalidRequestError):
        _credit(stripe_target, invoice, amount=400)
    with pytest.raises(stripe.InvalidRequestError):
        _credit(stripe_target, invoice, amount=400, credit_amount=100)
    note = _credit(stripe_target, invoice, amount=400, credit_amount=100, out_of_band_amount=300)

    assert note.out_of_band_amount == 300
    assert _balance(stripe_target, customer.id) == -100
    assert _invoice(stripe_target, invoice).post_payment_credit_notes_amount == 400


def test_a_refund_on_a_credit_note_is_recorded_on_it_and_leaves_the_balance_alone(
    stripe_target: StripeTarget,
) -> None:
    customer, _, invoice = paid_invoice(stripe_target, 1000)

    note = _credit(stripe_target, invoice, amount=250, refund_amount=250)

    assert [refund.amount_refunded for refund in note.refunds] == [250]
    assert note.customer_balance_transaction is None
    assert _balance(stripe_target, customer.id) == 0
    assert _due(_invoice(stripe_target, invoice)) == ("paid", 1000, 1000, 0, 0, 250)


def test_credit_notes_on_an_invoice_never_exceed_its_total(stripe_target: StripeTarget) -> None:
    _, _, invoice = open_invoice(stripe_target, 1000)

    _credit(stripe_target, invoice, amount=600)
    with pytest.raises(stripe.InvalidRequestError):
        _credit(stripe_target, invoice, amount=500)
    last = _credit(stripe_target, invoice, amount=400)

    assert last.number == f"{invoice.number}-CN-02"
    assert _due(_invoice(stripe_target, invoice)) == ("paid", 1000, 0, 0, 1000, 0)


def test_a_credit_note_of_an_invoice_line_credits_that_lines_amount(
    stripe_target: StripeTarget,
) -> None:
    _, _, invoice = open_invoice(stripe_target, 500, quantity=3)
    line = invoice.lines.data[0]

    by_quantity = _credit(
        stripe_target,
        invoice,
        lines=[{"type": "invoice_line_item", "invoice_line_item": line.id, "quantity": 1}],
    )
    by_amount = _credit(
        stripe_target,
        invoice,
        lines=[{"type": "invoice_line_item", "invoice_line_item": line.id, "amount": 200}],
    )
    listed = stripe_target.client.v1.credit_notes.line_items.list(by_quantity.id)

    credited = by_quantity.lines.data[0]
    assert (credited.type, credited.invoice_line_item) == ("invoice_line_item", line.id)
    assert (credited.quantity, credited.unit_amount, credited.amount) == (1, 500, 500)
    assert by_quantity.amount == 500
    assert by_amount.amount == by_amount.lines.data[0].amount == 200
    assert [entry.id for entry in listed.data] == [credited.id]
    assert _due(_invoice(stripe_target, invoice)) == ("open", 1500, 800, 800, 700, 0)


def test_a_custom_line_credits_its_unit_amount_times_its_quantity(
    stripe_target: StripeTarget,
) -> None:
    _, _, invoice = open_invoice(stripe_target, 1000)

    note = _credit(
        stripe_target,
        invoice,
        lines=[
            {
                "type": "custom_line_item",
                "unit_amount": 150,
                "quantity": 2,
                "description": "Goodwill",
            }
        ],
    )

    line = note.lines.data[0]
    assert (line.type, line.description, line.amount) == ("custom_line_item", "Goodwill", 300)
    assert note.amount == 300
    assert _invoice(stripe_target, invoice).amount_due == 700


def test_a_credited_discounted_line_gives_back_its_share_of_the_discount(
    stripe_target: StripeTarget,
) -> None:
    coupon = stripe_target.coupon(percent_off=10, duration="forever")
    _, _, invoice = open_invoice(stripe_target, 500, quantity=2, discounts=[{"coupon": coupon.id}])
    line = invoice.lines.data[0]

    note = _credit(
        stripe_target,
        invoice,
        lines=[{"type": "invoice_line_item", "invoice_line_item": line.id, "quantity": 1}],
    )

    assert invoice.total == 900
    assert (note.subtotal, note.discount_amount, note.total, note.amount) == (500, 50, 450, 450)
    assert note.lines.data[0].discount_amount == 50
    assert _invoice(stripe_target, invoice).amount_due == 450


def test_a_voided_credit_note_gives_the_invoice_back_what_it_took(
    stripe_target: StripeTarget,
) -> None:
    _, _, invoice = open_invoice(stripe_target, 1000)
    note = _credit(stripe_target, invoice, amount=300)

    voided = stripe_target.client.v1.credit_notes.void_credit_note(note.id)
    again = _credit(stripe_target, invoice, amount=1000)  # a void note no longer counts
    events = stripe_target.events_about(note.id, "credit_note.created", "credit_note.voided")

    assert (voided.status, voided.amount) == ("void", 300)
    assert voided.voided_at is not None
    assert again.number == f"{invoice.number}-CN-02"
    assert _due(_invoice(stripe_target, invoice)) == ("paid", 1000, 0, 0, 1000, 0)
    assert sorted(event.type for event in events) == ["credit_note.created", "credit_note.voided"]


def test_a_voided_credit_note_is_no_longer_taken_off_the_invoice(
    stripe_target: StripeTarget,
) -> None:
    _, _, invoice = open_invoice(stripe_target, 1000)
    note = _credit(stripe_target, invoice, amount=300)

    stripe_target.client.v1.credit_notes.void_credit_note(note.id)

    assert _due(_invoice(stripe_target, invoice)) == ("open", 1000, 1000, 1000, 0, 0)
    with pytest.raises(stripe.InvalidRequestError):
        stripe_target.client.v1.credit_notes.void_credit_note(note.id)


def test_a_credit_note_of_a_paid_invoice_cannot_be_voided(stripe_target: StripeTarget) -> None:
    customer, _, invoice = paid_invoice(stripe_target, 1000)
    note = _credit(stripe_target, invoice, amount=400, credit_amount=400)

    with pytest.raises(stripe.InvalidRequestError):
        stripe_target.client.v1.credit_notes.void_credit_note(note.id)

    assert stripe_target.client.v1.credit_notes.retrieve(note.id).status == "issued"
    assert _balance(stripe_target, customer.id) == -400


def test_a_preview_creates_nothing_and_equals_the_note_then_made(
    stripe_target: StripeTarget,
) -> None:
    customer, _, invoice = paid_invoice(stripe_target, 1000)
    line = invoice.lines.data[0]
    params: dict[str, Any] = {
        "invoice": invoice.id,
        "lines": [{"type": "invoice_line_item", "invoice_line_item": line.id, "amount": 350}],
        "credit_amount": 350,
    }

    preview = stripe_target.client.v1.credit_notes.preview(params=params)  # type: ignore[arg-type]
    preview_lines = stripe_target.client.v1.credit_notes.preview_lines.list(params=params)  # type: ignore[arg-type]
    listed_before = stripe_target.client.v1.credit_notes.list(params={"invoice": invoice.id or ""})
    balance_before = _balance(stripe_target, customer.id)
    note = stripe_target.client.v1.credit_notes.create(params=params)  # type: ignore[arg-type]

    def shape(value: stripe.CreditNote) -> tuple[Any, ...]:
        return (
            value.amount,
            value.subtotal,
            value.total,
            value.type,
            value.pre_payment_amount,
            value.post_payment_amount,
            value.number,
            [(entry.amount, entry.invoice_line_item) for entry in value.lines.data],
        )

    assert listed_before.data == []
    assert balance_before == 0
    assert [entry.amount for entry in preview_lines.data] == [350]
    assert shape(preview) == shape(note)
    assert _balance(stripe_target, customer.id) == -350


def test_a_draft_invoice_cannot_be_credited(stripe_target: StripeTarget) -> None:
    url = "http://127.0.0.1:9/hook" if stripe_target.is_emulator else "https://example.com/hook"
    stripe_target.webhook_endpoint(url=url, enabled_events=["invoice.created"])
    customer, subscription = subscribe(stripe_target, monthly(stripe_target, 1000))
    _, end = period(stripe_target, subscription.id)
    move_to(stripe_target, customer.id, end + 60)
    draft = latest_invoice(stripe_target, subscription.id)
    assert draft.status == "draft"

    with pytest.raises(stripe.InvalidRequestError) as refused:
        _credit(stripe_target, draft, amount=100)

    assert "draft" in str(refused.value.user_message)
    assert stripe_target.client.v1.credit_notes.list(params={"invoice": draft.id or ""}).data == []


def test_credit_notes_are_listed_by_invoice_and_customer_and_take_a_memo_and_metadata(
    stripe_target: StripeTarget,
) -> None:
    customer, _, invoice = open_invoice(stripe_target, 1000)
    first = _credit(stripe_target, invoice, amount=100, metadata={"ticket": "T-1"})
    second = _credit(stripe_target, invoice, amount=200)
    other_customer, _, other = open_invoice(stripe_target, 1000)
    _credit(stripe_target, other, amount=100)

    updated = stripe_target.client.v1.credit_notes.update(
        first.id, params={"memo": "Refund of a late week", "metadata": {"agent": "ana"}}
    )
    notes = stripe_target.client.v1.credit_notes
    by_invoice = notes.list(params={"invoice": invoice.id or ""})
    by_customer = notes.list(params={"customer": customer.id})
    events = stripe_target.events_about(first.id, "credit_note.updated")

    assert updated.memo == "Refund of a late week"
    assert updated.to_dict()["metadata"] == {"ticket": "T-1", "agent": "ana"}
    assert [note.id for note in by_invoice.data] == [second.id, first.id]
    assert [note.id for note in by_customer.data] == [second.id, first.id]
    assert other_customer.id != customer.id
    assert notes.retrieve(first.id).memo == "Refund of a late week"
    assert [event.type for event in events] == ["credit_note.updated"]
    assert events[0].data.to_dict()["previous_attributes"]["memo"] is None
