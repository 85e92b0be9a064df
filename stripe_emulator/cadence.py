"""Which prices a subscription can hold: recurring, active, one currency and one interval."""

from __future__ import annotations

from stripe_emulator.errors import invalid
from stripe_emulator.resources.common import lookup
from stripe_emulator.state import Record, Store


def recurring_price(store: Store, price_id: str, param: str) -> Record:
    price = lookup(store.prices, price_id, "price", param)
    if price["recurring"] is None:
        raise invalid(
            "The price specified is set to `type=one_time` but this field only accepts prices "
            "with `type=recurring`.",
            param,
        )
    if not price["active"]:
        raise invalid(
            "The price specified is inactive. This field only accepts active prices.", param
        )
    return price


def cadence(price: Record) -> tuple[str, str, int]:
    recurring = price["recurring"]
    return price["currency"], recurring["interval"], recurring["interval_count"]


def check_compatible(prices: list[tuple[str, Record]]) -> None:
    if len({cadence(price) for _, price in prices}) > 1:
        raise invalid(
            "Currency and interval fields must match across all plans on this subscription. "
            "(The emulator does not model mixed-interval subscriptions.)",
            "items",
        )
    seen: set[str] = set()
    for param, price in prices:
        if price["id"] in seen:
            raise invalid(
                f"Cannot add multiple subscription items with the same price: {price['id']}",
                param,
            )
        seen.add(price["id"])
