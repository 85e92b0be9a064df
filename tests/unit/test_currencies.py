"""The currencies Stripe accepts and their amounts in minor units (domain/billing/currencies.py)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from domain.billing.account_details import BillingDetails
from domain.billing.currencies import (
    STRIPE_CURRENCIES,
    THREE_DECIMAL_CURRENCIES,
    ZERO_DECIMAL_CURRENCIES,
    decimals,
    format_amount,
)
from domain.subscriptions.plans import PlanSpec
from tests.support.errors import validation_messages
from worker.settings import Settings

NOT_AT_STRIPE = ["XTS", "XAU", "XXX", "xdr", "usn", "zzz", "usdollar", ""]
"""ISO 4217 test, precious-metal, no-currency, drawing-right and fund codes, and non-codes."""


@pytest.mark.parametrize("code", NOT_AT_STRIPE)
def test_a_plan_in_a_currency_stripe_does_not_accept_is_refused_naming_the_currency(
    code: str,
) -> None:
    with pytest.raises(ValidationError) as error:
        PlanSpec(name="team", amount=2900, currency=code)

    assert validation_messages(error)[("currency",)] == (
        "must be an ISO 4217 currency code that Stripe accepts, such as usd or EUR"
    )
    assert error.value.errors()[0]["type"] == "currency"


@pytest.mark.parametrize("code", NOT_AT_STRIPE)
def test_a_billing_account_in_a_currency_stripe_does_not_accept_is_refused_naming_the_currency(
    code: str,
) -> None:
    with pytest.raises(ValidationError) as error:
        BillingDetails(name="Acme", email="billing@acme.example", currency=code)

    assert ("currency",) in validation_messages(error)


def test_a_default_currency_stripe_does_not_accept_is_refused_at_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("BILLING_DEFAULT_CURRENCY", "XTS")

    with pytest.raises(ValidationError) as error:
        Settings()

    assert ("default_currency",) in validation_messages(error)


def test_the_default_currency_is_kept_as_stripe_writes_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("BILLING_DEFAULT_CURRENCY", " EUR ")

    assert Settings().default_currency == "eur"


@pytest.mark.parametrize("code", ["usd", "EUR", "jpy", "KWD", "xof", "std", "xcg"])
def test_a_currency_stripe_accepts_is_taken_in_any_case_and_kept_in_lower_case(
    code: str,
) -> None:
    assert PlanSpec(name="team", amount=2900, currency=code).currency == code.lower()


def test_the_zero_and_three_decimal_currencies_are_all_ones_stripe_accepts() -> None:
    assert ZERO_DECIMAL_CURRENCIES <= STRIPE_CURRENCIES
    assert THREE_DECIMAL_CURRENCIES <= STRIPE_CURRENCIES
    assert not ZERO_DECIMAL_CURRENCIES & THREE_DECIMAL_CURRENCIES
    assert len(ZERO_DECIMAL_CURRENCIES) == 16
    assert len(THREE_DECIMAL_CURRENCIES) == 5


@pytest.mark.parametrize(
    ("currency", "places"),
    [("usd", 2), ("EUR", 2), ("jpy", 0), ("krw", 0), ("xpf", 0), ("kwd", 3), ("TND", 3)],
)
def test_a_currency_has_the_decimals_stripe_counts_its_amounts_in(
    currency: str, places: int
) -> None:
    assert decimals(currency) == places


@pytest.mark.parametrize(
    ("amount", "currency", "shown"),
    [
        (4900, "usd", "49.00 USD"),
        (5, "eur", "0.05 EUR"),
        (0, "gbp", "0.00 GBP"),
        (500, "jpy", "500 JPY"),
        (1230, "kwd", "1.230 KWD"),
        (50, "bhd", "0.050 BHD"),
        (-4900, "usd", "-49.00 USD"),
        (123_456_789, "usd", "1,234,567.89 USD"),
        (150_000, "jpy", "150,000 JPY"),
        (-1_234_560, "kwd", "-1,234.560 KWD"),
    ],
)
def test_an_amount_in_minor_units_is_shown_in_the_currencys_own_units(
    amount: int, currency: str, shown: str
) -> None:
    assert format_amount(amount, currency) == shown


@pytest.mark.parametrize("currency", sorted(THREE_DECIMAL_CURRENCIES))
def test_a_three_decimal_amount_stripe_would_round_is_refused_naming_the_amount(
    currency: str,
) -> None:
    with pytest.raises(ValidationError) as error:
        PlanSpec(name="team", amount=1234, currency=currency)

    assert validation_messages(error)[("amount",)].endswith(
        f"must be a multiple of 10 in {currency.upper()}: Stripe takes thousandths whose last "
        "digit is 0"
    )


def test_a_three_decimal_amount_ending_in_zero_and_any_zero_decimal_amount_are_taken() -> None:
    assert PlanSpec(name="team", amount=1230, currency="kwd").amount == 1230
    assert PlanSpec(name="team", amount=1235, currency="jpy").amount == 1235
    assert PlanSpec(name="team", amount=1235, currency="usd").amount == 1235
