"""Cards that require the customer's authentication (strong customer authentication, 3D
Secure), and the test cards an invoice can be paid with.

A customer set to require authentication (``POST /_emulator/payments/require_authentication``,
as on Stripe a default payment method of ``pm_card_authenticationRequired``) has every payment
attempt end ``requires_action``: Stripe cannot charge the card until the customer
authenticates on the invoice's hosted page.

* An attempt records ``invoice.payment_failed`` then ``invoice.payment_action_required`` (the
  invoice stays ``open``, the customer ``delinquent``), and dunning goes on as for a declined
  card (:func:`stripe_emulator.payments.attempt_payment`).
* An update of a subscription that must charge the card: ``payment_behavior=
  error_if_incomplete`` is refused whole, 402 ``subscription_payment_intent_requires_action``;
  ``pending_if_incomplete`` keeps the change as the subscription's ``pending_update`` until its
  invoice is paid, or until it expires (23 h, or the period's end).
* ``POST /v1/invoices/{id}/pay`` with no ``payment_method`` is refused, 402
  ``invoice_payment_intent_requires_action``; with one of :data:`TEST_CARDS` it is paid with that
  card (``pm_card_visa``), declined or refused as that card would be.
* The customer authenticates on the invoice's hosted page (``hosted_invoice_url``, served by the
  emulator at ``/_emulator/hosted_invoices/{id}``): succeeding pays the invoice (and applies the
  pending update it was paying for), failing records ``invoice.payment_failed``. The card still
  requires authentication for the next payment, as ``pm_card_authenticationRequired`` does.
"""

from __future__ import annotations

from typing import Literal

from stripe_emulator import payments, recorder
from stripe_emulator.errors import StripeError, card_declined, invalid, invoice_requires_action
from stripe_emulator.state import Record, Store

CardOutcome = Literal["pays", "declines", "requires_action"]

TEST_CARDS: dict[str, CardOutcome] = {
    "pm_card_visa": "pays",
    "pm_card_mastercard": "pays",
    "pm_card_chargeCustomerFail": "declines",
    "pm_card_authenticationRequired": "requires_action",
}
"""Stripe's test payment methods the emulator knows, by what charging them does."""


def require_authentication(store: Store, customer_id: str) -> None:
    """Every later payment attempt of the customer needs its authentication."""
    store.failing_customers.discard(customer_id)
    store.authenticating_customers.add(customer_id)


def requires_authentication(store: Store, invoice: Record) -> bool:
    return invoice["customer"] in store.authenticating_customers


def pay(store: Store, invoice: Record, now: int, payment_method: str | None) -> None:
    """``POST /v1/invoices/{id}/pay``: charge the customer's card, or ``payment_method``
    (:data:`TEST_CARDS`); raises the 402 of a card that declined or needs authentication (the
    failed attempt is recorded on the invoice, as on Stripe)."""
    if payment_method is None:
        if not payments.attempt_payment(store, invoice, now):
            raise _refusal(store, invoice)
        return
    outcome = TEST_CARDS.get(payment_method)
    if outcome is None:
        raise invalid(
            f"No such PaymentMethod: '{payment_method}' (the emulator knows the test cards "
            f"{', '.join(sorted(TEST_CARDS))})",
            "payment_method",
            "resource_missing",
        )
    invoice["attempted"] = True
    invoice["attempt_count"] += 1
    if outcome == "pays":
        payments.mark_paid(store, invoice, now)
        return
    payments.record_failed_attempt(store, invoice, now, needs_action=outcome == "requires_action")
    raise invoice_requires_action() if outcome == "requires_action" else card_declined()


def authenticate(store: Store, invoice: Record, now: int, *, succeed: bool) -> None:
    """The customer, on the hosted page, authenticates the payment of an open invoice (it is
    paid) or fails to (one more failed attempt)."""
    if invoice["status"] != "open":
        raise ValueError(f"invoice {invoice['id']} is {invoice['status']}, not open")
    recorder.subscription(store, payments.subscription_of(store, invoice))
    invoice["attempted"] = True
    invoice["attempt_count"] += 1
    if succeed:
        payments.mark_paid(store, invoice, now)
    else:
        payments.record_failed_attempt(store, invoice, now, needs_action=True)


def _refusal(store: Store, invoice: Record) -> StripeError:
    return invoice_requires_action() if requires_authentication(store, invoice) else card_declined()
