"""The price fixture (``POST /_emulator/bulk/prices``): prices with the ids a seeded database
names, which Stripe's API never lets a caller choose, served like any others."""

from __future__ import annotations

import pytest
import stripe  # noqa: TID251 - these tests exercise the emulator through the real SDK

from stripe_emulator import EmulatorAdmin, EmulatorAdminError

pytestmark = pytest.mark.emulator_only

TEAM = {
    "id": "price_team",
    "product": "prod_team",
    "unit_amount": 2900,
    "currency": "USD",
    "interval": "month",
}


def test_a_fixture_price_is_read_and_subscribed_to_as_one_the_api_made(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    assert admin.bulk_prices([TEAM]) == ["price_team"]

    price = emulator_client.v1.prices.retrieve("price_team")
    product = emulator_client.v1.products.retrieve("prod_team")
    customer = emulator_client.v1.customers.create(params={"name": "Acme"})
    subscription = emulator_client.v1.subscriptions.create(
        params={"customer": customer.id, "items": [{"price": "price_team"}]}
    )

    assert (price.unit_amount, price.currency, price.product) == (2900, "usd", "prod_team")
    assert price.recurring is not None
    assert price.recurring.interval == "month"
    assert product.id == "prod_team"
    assert subscription["items"].data[0].price.id == "price_team"


@pytest.mark.parametrize(
    "bad",
    [
        {**TEAM, "id": "team"},
        {**TEAM, "interval": "fortnight"},
        {**TEAM, "unit_amount": -1},
        {**TEAM, "currency": "zzz"},
        {**TEAM, "nickname": "Team"},
    ],
    ids=["not-a-price-id", "unknown-interval", "negative-amount", "unknown-currency", "extra"],
)
def test_one_bad_price_makes_none_of_the_request(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin, bad: dict[str, object]
) -> None:
    good = {**TEAM, "id": "price_starter", "product": "prod_starter", "unit_amount": 900}

    with pytest.raises(EmulatorAdminError):
        admin.bulk_prices([good, bad])

    with pytest.raises(stripe.InvalidRequestError):
        emulator_client.v1.prices.retrieve("price_starter")


def test_a_price_id_that_exists_is_refused(admin: EmulatorAdmin) -> None:
    admin.bulk_prices([TEAM])

    with pytest.raises(EmulatorAdminError, match="exists"):
        admin.bulk_prices([TEAM])
