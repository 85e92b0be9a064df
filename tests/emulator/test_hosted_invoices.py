"""The hosted invoice page the emulator serves at ``hosted_invoice_url``, where a customer
whose card needs authentication authenticates (or fails to) the payment of an open invoice
(``stripe_emulator/hosted_invoices.py``). Stripe's own page cannot be driven by an API: this
one stands in for the customer."""

from __future__ import annotations

import httpx
import pytest

from stripe_emulator import EmulatorAdmin, EmulatorAdminError
from tests.emulator.billing_support import item_of, upgrade_held_for_authentication
from tests.emulator.support import EmulatorProcess, StripeTarget, sdk_client

pytestmark = pytest.mark.emulator_only


@pytest.fixture
def target(emulator: EmulatorProcess, admin: EmulatorAdmin) -> StripeTarget:
    return StripeTarget("emulator", sdk_client(emulator.url), admin)


def held_upgrade(target: StripeTarget) -> tuple[str, str, str]:
    """An upgrade held pending for the customer's authentication: (subscription, dearer
    price, its open invoice)."""
    _, subscription, dearer, _, invoice_id = upgrade_held_for_authentication(target)
    return subscription.id, dearer.id, invoice_id


def test_an_invoice_links_to_its_page_at_the_address_the_api_was_reached_at(
    target: StripeTarget, emulator: EmulatorProcess
) -> None:
    _, _, invoice_id = held_upgrade(target)

    url = target.client.v1.invoices.retrieve(invoice_id).hosted_invoice_url
    page = httpx.get(str(url))

    assert url == f"{emulator.url}/_emulator/hosted_invoices/{invoice_id}"
    assert page.status_code == 200
    assert "$10.00" in page.text  # half a month of 30 $, less half a month of 10 $
    assert "Authenticate and pay" in page.text


def test_authenticating_on_the_page_pays_the_invoice_and_applies_the_held_upgrade(
    target: StripeTarget, admin: EmulatorAdmin
) -> None:
    subscription_id, dearer_id, invoice_id = held_upgrade(target)

    status = admin.authenticate_invoice(invoice_id, succeed=True)

    applied = target.client.v1.subscriptions.retrieve(subscription_id)
    assert status == "paid"
    assert applied.pending_update is None
    assert item_of(applied).price.id == dearer_id
    assert target.events_about(invoice_id, "invoice.paid")


def test_failing_authentication_leaves_the_invoice_open_and_the_upgrade_pending(
    target: StripeTarget, admin: EmulatorAdmin
) -> None:
    subscription_id, dearer_id, invoice_id = held_upgrade(target)

    status = admin.authenticate_invoice(invoice_id, succeed=False)

    held = target.client.v1.subscriptions.retrieve(subscription_id)
    invoice = target.client.v1.invoices.retrieve(invoice_id)
    assert status == "open"
    assert invoice.attempt_count == 2
    assert held.pending_update is not None
    assert item_of(held).price.id != dearer_id
    assert len(target.events_about(invoice_id, "invoice.payment_failed")) == 2


def test_the_page_s_buttons_post_a_form_and_come_back_to_the_page(
    target: StripeTarget, emulator: EmulatorProcess
) -> None:
    _, _, invoice_id = held_upgrade(target)
    page = f"{emulator.url}/_emulator/hosted_invoices/{invoice_id}"

    answer = httpx.post(f"{page}/authenticate", data={"outcome": "succeed"})
    again = httpx.get(page)

    assert answer.status_code == 303
    assert answer.headers["location"].endswith(f"/_emulator/hosted_invoices/{invoice_id}")
    assert "paid" in again.text
    assert "Authenticate and pay" not in again.text


def test_a_paid_invoice_cannot_be_authenticated_again(
    target: StripeTarget, admin: EmulatorAdmin
) -> None:
    _, _, invoice_id = held_upgrade(target)
    admin.authenticate_invoice(invoice_id)

    with pytest.raises(EmulatorAdminError) as raised:
        admin.authenticate_invoice(invoice_id)

    assert raised.value.status == 400
    assert "paid, not open" in str(raised.value)
