"""Cards that need the customer's authentication (strong customer authentication, 3D
Secure): an upgrade invoiced at once cannot be charged until the customer authenticates on
the invoice's hosted page. On the emulator the customer is set to need it through its admin
API; on real Stripe through the test card ``pm_card_authenticationRequired``.

The rules our upgrades rely on (issue 44): ``error_if_incomplete`` refuses the update whole
with its own code (not ``card_declined``); ``pending_if_incomplete`` keeps it pending with an
open invoice and a page the customer can pay it on; paying that invoice applies the update; an
update nobody pays lapses when Stripe expires it."""

from __future__ import annotations

import pytest
import stripe  # noqa: TID251 - these tests exercise the emulator through the real SDK

from tests.emulator.billing_support import (
    item_of,
    latest_invoice,
    mid_period_upgrade,
    move_to,
    upgrade_held_for_authentication,
    upgrade_invoiced_now,
)
from tests.emulator.support import StripeTarget

HOUR = 3600


def _subscription_needing_authentication(
    target: StripeTarget,
) -> tuple[stripe.Customer, stripe.Subscription, stripe.Price]:
    """A paid monthly subscription, mid-period, whose customer's card now needs
    authentication for every charge; and a dearer price."""
    return mid_period_upgrade(target, target.make_payments_require_authentication)


def test_error_if_incomplete_refuses_an_upgrade_that_needs_authentication_with_its_own_code(
    stripe_target: StripeTarget,
) -> None:
    _, subscription, dearer = _subscription_needing_authentication(stripe_target)

    with pytest.raises(stripe.StripeError) as raised:
        upgrade_invoiced_now(stripe_target, subscription, dearer, "error_if_incomplete")

    after = stripe_target.client.v1.subscriptions.retrieve(subscription.id)
    assert raised.value.http_status == 402
    assert raised.value.code == "subscription_payment_intent_requires_action"
    assert item_of(after).price.id == item_of(subscription).price.id
    assert after.latest_invoice == subscription.latest_invoice
    assert after.pending_update is None


def test_pending_if_incomplete_holds_an_upgrade_that_needs_authentication_on_an_open_invoice(
    stripe_target: StripeTarget,
) -> None:
    _, subscription, dearer = _subscription_needing_authentication(stripe_target)

    held = upgrade_invoiced_now(stripe_target, subscription, dearer, "pending_if_incomplete")

    invoice = latest_invoice(stripe_target, subscription.id)
    assert held.pending_update is not None
    assert held.pending_update.subscription_items is not None
    assert [i.price.id for i in held.pending_update.subscription_items] == [dearer.id]
    assert item_of(held).price.id == item_of(subscription).price.id
    assert invoice.billing_reason == "subscription_update"
    assert (invoice.status, invoice.amount_paid) == ("open", 0)
    assert invoice.hosted_invoice_url  # where the customer authenticates
    assert stripe_target.events_about(invoice.id, "invoice.payment_action_required")


def test_an_upgrade_held_for_authentication_applies_once_its_invoice_is_paid(
    stripe_target: StripeTarget,
) -> None:
    _, subscription, dearer, _, invoice_id = upgrade_held_for_authentication(stripe_target)

    # What the customer does on the hosted page, in a form an API can do on real Stripe too:
    # pay it with a card that needs no authentication.
    stripe_target.client.v1.invoices.pay(invoice_id, params={"payment_method": "pm_card_visa"})

    applied = stripe_target.client.v1.subscriptions.retrieve(subscription.id)
    assert applied.pending_update is None
    assert item_of(applied).price.id == dearer.id
    assert stripe_target.client.v1.invoices.retrieve(invoice_id).status == "paid"


def test_paying_an_invoice_with_the_card_that_needs_authentication_is_refused_with_its_own_code(
    stripe_target: StripeTarget,
) -> None:
    *_, invoice_id = upgrade_held_for_authentication(stripe_target)

    with pytest.raises(stripe.StripeError) as raised:
        stripe_target.client.v1.invoices.pay(invoice_id)

    assert raised.value.http_status == 402
    assert raised.value.code == "invoice_payment_intent_requires_action"
    assert stripe_target.client.v1.invoices.retrieve(invoice_id).status == "open"


def test_an_upgrade_nobody_authenticates_lapses_when_stripe_expires_it(
    stripe_target: StripeTarget,
) -> None:
    customer, subscription, _, held, invoice_id = upgrade_held_for_authentication(stripe_target)
    assert held.pending_update is not None

    move_to(stripe_target, customer.id, held.pending_update.expires_at + HOUR)

    lapsed = stripe_target.client.v1.subscriptions.retrieve(subscription.id)
    assert lapsed.pending_update is None
    assert item_of(lapsed).price.id == item_of(subscription).price.id
    assert stripe_target.client.v1.invoices.retrieve(invoice_id).status == "void"
