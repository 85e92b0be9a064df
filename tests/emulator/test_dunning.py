"""The payments admin API and dunning: failed invoices retried as emulator time moves, and the
subscription's status once retries run out."""

from __future__ import annotations

import httpx
import pytest
import stripe  # noqa: TID251 - these tests exercise the emulator through the real SDK

from stripe_emulator import Dunning, EmulatorAdmin, EmulatorAdminError
from tests.emulator.support import EmulatorProcess

pytestmark = pytest.mark.emulator_only

DAY = 86_400


def _renewal_fails(
    client: stripe.StripeClient, admin: EmulatorAdmin
) -> tuple[stripe.Subscription, stripe.Invoice, int]:
    """A monthly subscription whose renewal was just declined; answers it, the renewal invoice
    and the renewal's time."""
    customer = client.v1.customers.create(params={"name": "Declined"})
    price = client.v1.prices.create(
        params={"currency": "usd", "unit_amount": 1000, "product_data": {"name": "Plan"},
                "recurring": {"interval": "month"}}
    )  # fmt: skip
    subscription = client.v1.subscriptions.create(
        params={"customer": customer.id, "items": [{"price": price.id}]}
    )
    end = subscription["items"].data[0].current_period_end
    admin.fail_payments(customer.id)
    admin.set_time(end + 60)
    renewed = client.v1.subscriptions.retrieve(subscription.id)
    assert isinstance(renewed.latest_invoice, str)
    return renewed, client.v1.invoices.retrieve(renewed.latest_invoice), end


def _status(client: stripe.StripeClient, subscription_id: str) -> str:
    return client.v1.subscriptions.retrieve(subscription_id).status


def test_dunning_defaults_to_three_retries_three_days_apart_then_past_due(
    admin: EmulatorAdmin,
) -> None:
    assert admin.dunning() == Dunning(
        retries=3, retry_interval_seconds=3 * DAY, final_status="past_due"
    )


def test_a_declined_renewal_is_retried_at_each_interval_and_ends_with_the_final_status(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    admin.set_dunning(retries=2, retry_interval_seconds="2d", final_status="unpaid")
    subscription, invoice, end = _renewal_fails(emulator_client, admin)
    assert invoice.id is not None

    states = []
    for at in (end + 2 * DAY - 60, end + 2 * DAY + 120, end + 4 * DAY + 120):
        admin.set_time(at)
        seen = emulator_client.v1.invoices.retrieve(invoice.id)
        states.append(
            (
                seen.attempt_count,
                seen.next_payment_attempt,
                _status(emulator_client, subscription.id),
            )
        )

    assert (invoice.attempt_count, invoice.next_payment_attempt) == (1, end + 2 * DAY)
    assert subscription.status == "past_due"
    assert states == [
        (1, end + 2 * DAY, "past_due"),
        (2, end + 4 * DAY, "past_due"),
        (3, None, "unpaid"),
    ]
    assert emulator_client.v1.invoices.retrieve(invoice.id).status == "open"


def test_retries_run_out_into_a_canceled_subscription_when_dunning_says_so(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    admin.set_dunning(retries=1, retry_interval_seconds=DAY, final_status="canceled")
    subscription, _, end = _renewal_fails(emulator_client, admin)

    admin.set_time(end + DAY + 120)
    canceled = emulator_client.v1.subscriptions.retrieve(subscription.id)

    assert canceled.status == "canceled"
    assert canceled.ended_at == end + DAY  # the retry's time on the timeline
    assert canceled.cancellation_details is not None
    assert canceled.cancellation_details.reason == "payment_failed"


def test_past_due_as_the_final_status_leaves_the_subscription_renewing(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    admin.set_dunning(retries=0)
    subscription, invoice, _ = _renewal_fails(emulator_client, admin)

    admin.advance_clock("32d")
    listed = emulator_client.v1.invoices.list(params={"subscription": subscription.id})

    assert invoice.next_payment_attempt is None
    assert _status(emulator_client, subscription.id) == "past_due"
    assert [i.status for i in listed.data] == ["open", "open", "paid"]


def test_succeeding_payments_pays_open_invoices_and_reactivates_the_subscription(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    admin.set_dunning(retries=0, final_status="unpaid")
    subscription, invoice, _ = _renewal_fails(emulator_client, admin)
    customer_id = str(subscription.customer)
    unpaid = _status(emulator_client, subscription.id)
    delinquent = emulator_client.v1.customers.retrieve(customer_id).delinquent

    paid = admin.succeed_payments(customer_id)

    assert (unpaid, delinquent) == ("unpaid", True)
    assert paid == [invoice.id]
    assert _status(emulator_client, subscription.id) == "active"
    assert emulator_client.v1.customers.retrieve(customer_id).delinquent is False
    assert admin.failing_customers() == []


def test_a_first_invoice_that_fails_leaves_the_subscription_incomplete_then_expired(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    customer = emulator_client.v1.customers.create()
    price = emulator_client.v1.prices.create(
        params={"currency": "usd", "unit_amount": 500, "product_data": {"name": "Plan"},
                "recurring": {"interval": "month"}}
    )  # fmt: skip
    admin.fail_payments(customer.id)

    created = emulator_client.v1.subscriptions.create(
        params={"customer": customer.id, "items": [{"price": price.id}]}
    )
    admin.advance_clock("23h1m")
    expired = emulator_client.v1.subscriptions.retrieve(created.id)
    assert isinstance(created.latest_invoice, str)

    assert created.status == "incomplete"
    assert expired.status == "incomplete_expired"
    assert emulator_client.v1.invoices.retrieve(created.latest_invoice).status == "void"


def test_an_incomplete_subscription_becomes_active_once_its_first_invoice_is_paid(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    customer = emulator_client.v1.customers.create()
    price = emulator_client.v1.prices.create(
        params={"currency": "usd", "unit_amount": 500, "product_data": {"name": "Plan"},
                "recurring": {"interval": "month"}}
    )  # fmt: skip
    admin.fail_payments(customer.id)
    created = emulator_client.v1.subscriptions.create(
        params={"customer": customer.id, "items": [{"price": price.id}]}
    )

    admin.succeed_payments(customer.id)
    admin.advance_clock("1d")

    assert emulator_client.v1.subscriptions.retrieve(created.id).status == "active"


def test_an_invoice_can_be_paid_through_the_api_or_out_of_band(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    admin.set_dunning(retries=0)
    subscription, invoice, _ = _renewal_fails(emulator_client, admin)
    assert invoice.id is not None

    with pytest.raises(stripe.CardError):
        emulator_client.v1.invoices.pay(invoice.id)
    attempts = emulator_client.v1.invoices.retrieve(invoice.id).attempt_count
    paid = emulator_client.v1.invoices.pay(invoice.id, params={"paid_out_of_band": True})
    with pytest.raises(stripe.InvalidRequestError) as again:
        emulator_client.v1.invoices.pay(invoice.id)

    assert attempts == 2
    assert paid.status == "paid"
    assert _status(emulator_client, subscription.id) == "active"
    assert again.value.code == "invoice_already_paid"


def test_the_payments_admin_refuses_unknown_customers_and_bad_dunning(
    admin: EmulatorAdmin, emulator: EmulatorProcess
) -> None:
    with pytest.raises(EmulatorAdminError) as unknown:
        admin.fail_payments("cus_nobody")
    with pytest.raises(EmulatorAdminError) as status:
        admin.set_dunning(final_status="forgiven")
    with pytest.raises(EmulatorAdminError) as retries:
        admin.set_dunning(retries=-1)
    response = httpx.post(f"{emulator.url}/_emulator/dunning", json={"retry": 2})

    assert unknown.value.status == 404
    assert status.value.status == 400
    assert retries.value.status == 400
    assert response.status_code == 400
    assert admin.dunning().retries == 3


def test_reset_forgets_invoices_failing_customers_and_dunning(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    subscription, _, _ = _renewal_fails(emulator_client, admin)
    admin.set_dunning(retries=9)

    admin.reset()

    assert admin.dunning().retries == 3
    assert admin.failing_customers() == []
    assert emulator_client.v1.invoices.list().data == []
    assert emulator_client.v1.invoice_items.list().data == []
    with pytest.raises(stripe.InvalidRequestError):
        emulator_client.v1.subscriptions.retrieve(subscription.id)
