"""Products and prices: behaviour shared by the emulator and real Stripe test mode."""

from __future__ import annotations

import pytest
import stripe  # noqa: TID251 - these tests exercise the emulator through the real SDK

from tests.emulator.support import StripeTarget, unique


def test_a_product_round_trips_and_updates(stripe_target: StripeTarget) -> None:
    product = stripe_target.product(
        name="Team plan", description="For teams", metadata={"tier": "team"}
    )

    updated = stripe_target.client.v1.products.update(
        product.id, params={"name": "Team plan v2", "active": False}
    )
    fetched = stripe_target.client.v1.products.retrieve(product.id)

    assert product.id.startswith("prod_")
    assert product.active is True
    assert updated.name == "Team plan v2"
    assert fetched.active is False
    assert fetched.description == "For teams"
    assert fetched.metadata.to_dict() == {"tier": "team"}


def test_listing_products_filters_by_ids(stripe_target: StripeTarget) -> None:
    first = stripe_target.product()
    second = stripe_target.product()
    stripe_target.product()

    listed = stripe_target.client.v1.products.list(params={"ids": [first.id, second.id]})

    assert {product.id for product in listed.data} == {first.id, second.id}


def test_a_recurring_price_round_trips_with_stripe_fields(stripe_target: StripeTarget) -> None:
    lookup_key = unique("pro_monthly")
    price = stripe_target.price(
        unit_amount=2900,
        currency="eur",
        recurring={"interval": "month", "interval_count": 3},
        lookup_key=lookup_key,
        nickname="Pro quarterly",
        metadata={"plan": "pro"},
    )

    fetched = stripe_target.client.v1.prices.retrieve(price.id)

    assert price.id.startswith("price_")
    assert fetched.type == "recurring"
    assert fetched.unit_amount == 2900
    assert str(fetched.unit_amount_decimal) == "2900"  # the SDK decodes it as a Decimal
    assert fetched.currency == "eur"
    assert fetched.recurring is not None
    assert (fetched.recurring.interval, fetched.recurring.interval_count) == ("month", 3)
    assert fetched.recurring.usage_type == "licensed"
    assert fetched.lookup_key == lookup_key
    assert fetched.nickname == "Pro quarterly"
    assert fetched.billing_scheme == "per_unit"


def test_a_price_can_create_its_product_inline(stripe_target: StripeTarget) -> None:
    name = unique("inline")
    price = stripe_target.price(product_data={"name": name}, expand=["product"])

    assert isinstance(price.product, stripe.Product)
    assert price.product.name == name


def test_a_price_without_recurring_is_one_time(stripe_target: StripeTarget) -> None:
    price = stripe_target.price(unit_amount=500)

    assert price.type == "one_time"
    assert price.recurring is None


def test_prices_are_found_by_lookup_key(stripe_target: StripeTarget) -> None:
    key = unique("lookup")
    wanted = stripe_target.price(lookup_key=key, recurring={"interval": "year"})
    stripe_target.price(lookup_key=unique("lookup"), recurring={"interval": "year"})

    listed = stripe_target.client.v1.prices.list(params={"lookup_keys": [key]})

    assert [price.id for price in listed.data] == [wanted.id]


def test_prices_are_listed_by_product_and_active_flag(stripe_target: StripeTarget) -> None:
    product = stripe_target.product()
    active = stripe_target.price(product=product.id)
    archived = stripe_target.price(product=product.id)
    stripe_target.client.v1.prices.update(archived.id, params={"active": False})

    active_only = stripe_target.client.v1.prices.list(
        params={"product": product.id, "active": True}
    )
    everything = stripe_target.client.v1.prices.list(params={"product": product.id})

    assert [price.id for price in active_only.data] == [active.id]
    assert {price.id for price in everything.data} == {active.id, archived.id}


def test_a_taken_lookup_key_is_rejected_unless_transferred(stripe_target: StripeTarget) -> None:
    key = unique("taken")
    first = stripe_target.price(lookup_key=key)

    with pytest.raises(stripe.InvalidRequestError) as raised:
        stripe_target.price(lookup_key=key)
    second = stripe_target.price(lookup_key=key, transfer_lookup_key=True)

    assert raised.value.param == "lookup_key"
    assert second.lookup_key == key
    assert stripe_target.client.v1.prices.retrieve(first.id).lookup_key is None


def test_a_price_for_a_missing_product_is_a_404_on_param_product(
    stripe_target: StripeTarget,
) -> None:
    with pytest.raises(stripe.InvalidRequestError) as raised:
        stripe_target.client.v1.prices.create(
            params={"currency": "usd", "unit_amount": 100, "product": "prod_missing0000"}
        )

    assert raised.value.http_status == 404
    assert raised.value.code == "resource_missing"
    assert raised.value.param == "product"


def test_an_invalid_recurring_interval_is_rejected_on_its_param(
    stripe_target: StripeTarget,
) -> None:
    with pytest.raises(stripe.InvalidRequestError) as raised:
        stripe_target.price(recurring={"interval": "fortnight"})

    assert raised.value.http_status == 400
    assert raised.value.param == "recurring[interval]"


def test_a_non_integer_amount_is_rejected_as_parameter_invalid_integer(
    stripe_target: StripeTarget,
) -> None:
    with pytest.raises(stripe.InvalidRequestError) as raised:
        stripe_target.price(unit_amount="ten")

    assert raised.value.code == "parameter_invalid_integer"
    assert raised.value.param == "unit_amount"


def test_a_missing_currency_is_rejected_as_parameter_missing(
    stripe_target: StripeTarget,
) -> None:
    product = stripe_target.product()

    with pytest.raises(stripe.InvalidRequestError) as raised:
        stripe_target.client.v1.prices.create(
            params={"unit_amount": 100, "product": product.id}  # type: ignore[typeddict-item]
        )

    assert raised.value.code == "parameter_missing"
    assert raised.value.param == "currency"


def test_a_price_expands_its_product(stripe_target: StripeTarget) -> None:
    price = stripe_target.price()

    fetched = stripe_target.client.v1.prices.retrieve(price.id, params={"expand": ["product"]})

    assert isinstance(fetched.product, stripe.Product)
    assert fetched.product.id == price.product


@pytest.mark.parametrize("currency", ["xts", "xau", "xxx", "abc"])
def test_a_price_in_a_currency_stripe_does_not_accept_is_refused_naming_currency(
    stripe_target: StripeTarget, currency: str
) -> None:
    with pytest.raises(stripe.InvalidRequestError) as raised:
        stripe_target.price(currency=currency, unit_amount=100)

    assert raised.value.http_status == 400
    assert raised.value.param == "currency"
    assert f"Invalid currency: {currency}" in str(raised.value.user_message)


def test_a_zero_decimal_price_counts_whole_units(stripe_target: StripeTarget) -> None:
    price = stripe_target.price(currency="JPY", unit_amount=500)

    assert (price.currency, price.unit_amount) == ("jpy", 500)


def test_a_three_decimal_price_must_be_rounded_to_ten(stripe_target: StripeTarget) -> None:
    rounded = stripe_target.price(currency="kwd", unit_amount=1250)
    with pytest.raises(stripe.InvalidRequestError) as raised:
        stripe_target.price(currency="kwd", unit_amount=1255)

    assert rounded.unit_amount == 1250
    assert raised.value.param == "unit_amount"


def test_prices_are_listed_by_currency(stripe_target: StripeTarget) -> None:
    product = stripe_target.product()
    euro = stripe_target.price(product=product.id, currency="eur")
    stripe_target.price(product=product.id, currency="usd")

    listed = stripe_target.client.v1.prices.list(params={"product": product.id, "currency": "eur"})

    assert [p.id for p in listed.data] == [euro.id]
