"""A benchmark fixture: prices (and their products) with the ids a seeded database names.

Stripe never lets a caller choose a price's id (``POST /v1/prices`` makes one), so a database
seeded with its own price ids (``price_team``) cannot be mirrored through the API. ``POST
/_emulator/bulk/prices`` makes them directly in the store, of the shape ``POST /v1/prices``
makes, with no events or request-log entries; then ``/_emulator/bulk/subscriptions`` can put
subscriptions on them. All or nothing: one bad price makes none.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stripe_emulator import currencies, objects
from stripe_emulator.errors import StripeError
from stripe_emulator.state import Record, Store

INTERVALS = frozenset({"day", "week", "month", "year"})
FIELDS = frozenset({"id", "product", "unit_amount", "currency", "interval"})


class FixtureError(ValueError):
    """A fixture request that cannot be carried out (nothing was made)."""


def seed_prices(store: Store, now: int, prices: Sequence[Any]) -> list[str]:
    """Make each of ``prices`` (``{"id", "product", "unit_amount", "currency", "interval"}``:
    a recurring price, once per ``interval``) and any product it names that does not exist;
    returns the price ids. Nothing is made if one is refused."""
    checked = [_checked(store, price) for price in prices]
    ids = [price["id"] for price in checked]
    if len(set(ids)) != len(ids):
        raise FixtureError("each price must have its own id")
    for price in checked:
        product_id = price["product"]
        if product_id not in store.products:
            store.products[product_id] = objects.product(product_id, now, {"name": product_id})
        fields = {
            "currency": price["currency"],
            "unit_amount": price["unit_amount"],
            "recurring": {"interval": price["interval"], "interval_count": 1},
        }
        store.prices[price["id"]] = objects.price(price["id"], now, product_id, fields)
    return ids


def _checked(store: Store, price: Any) -> Record:
    if not isinstance(price, dict):
        raise FixtureError("each price must be an object")
    unknown = set(price) - FIELDS
    if unknown:
        raise FixtureError(f"unknown price fields: {', '.join(sorted(unknown))}")
    missing = FIELDS - set(price)
    if missing:
        raise FixtureError(f"a price needs {', '.join(sorted(missing))}")
    price_id, product_id = price["id"], price["product"]
    if not isinstance(price_id, str) or not price_id.startswith("price_"):
        raise FixtureError(f"a price id starts with price_: {price_id!r}")
    if price_id in store.prices:
        raise FixtureError(f"price {price_id} exists")
    if not isinstance(product_id, str) or not product_id.startswith("prod_"):
        raise FixtureError(f"a product id starts with prod_: {product_id!r}")
    amount = price["unit_amount"]
    if not isinstance(amount, int) or isinstance(amount, bool) or amount < 0:
        raise FixtureError(f"unit_amount must be a whole number of minor units: {amount!r}")
    if price["interval"] not in INTERVALS:
        raise FixtureError(f"interval must be one of {', '.join(sorted(INTERVALS))}")
    if not isinstance(price["currency"], str):
        raise FixtureError(f"currency must be a currency code: {price['currency']!r}")
    try:
        currency = currencies.check(price["currency"])
    except StripeError as error:  # the API's own refusal of an unknown currency
        raise FixtureError(f"currency: {error}") from error
    return {**price, "currency": currency}
