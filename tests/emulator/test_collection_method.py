"""How a subscription is paid: the emulator checks ``days_until_due`` against
``collection_method`` (real Stripe's own rules are covered by the contract tests)."""

from __future__ import annotations

from typing import Any

import pytest
import stripe  # noqa: TID251 - these tests exercise the emulator through the real SDK

pytestmark = pytest.mark.emulator_only


def _subscription_params(client: stripe.StripeClient) -> dict[str, Any]:
    customer = client.v1.customers.create(params={"name": "Invoiced"})
    price = client.v1.prices.create(
        params={
            "currency": "usd",
            "unit_amount": 900,
            "recurring": {"interval": "month"},
            "product_data": {"name": "Plan"},
        }
    )
    return {"customer": customer.id, "items": [{"price": price.id}]}


@pytest.mark.parametrize(
    "extra",
    [
        pytest.param({"collection_method": "send_invoice"}, id="send-invoice-without-days"),
        pytest.param({"days_until_due": 3}, id="days-without-send-invoice"),
        pytest.param(
            {"collection_method": "charge_automatically", "days_until_due": 3},
            id="days-when-charging",
        ),
    ],
)
def test_days_until_due_goes_with_send_invoice_only(
    emulator_client: stripe.StripeClient, extra: dict[str, Any]
) -> None:
    params = {**_subscription_params(emulator_client), **extra}

    with pytest.raises(stripe.InvalidRequestError) as raised:
        emulator_client.v1.subscriptions.create(params=params)  # type: ignore[arg-type]

    assert raised.value.param == "days_until_due"


def test_a_subscription_charges_automatically_by_default(
    emulator_client: stripe.StripeClient,
) -> None:
    params = _subscription_params(emulator_client)

    created = emulator_client.v1.subscriptions.create(params=params)  # type: ignore[arg-type]

    assert (created.collection_method, created.days_until_due) == ("charge_automatically", None)
