"""A benchmark fixture: many customers, each with one active subscription, made in the store.

``POST /_emulator/bulk/subscriptions`` (:func:`seed_subscriptions`) makes in seconds what a
million ``POST /v1/customers`` and ``POST /v1/subscriptions`` would take hours to: customer
``i`` and its subscription ``i`` for ``i`` in ``start .. start + count - 1``, their ids from
patterns (``"cus_scale{i:09d}"``), each subscription on one price (a list cycled by ``i``, with
sparse exceptions) with one item and the same current period.

They are the objects the create paths make, of the same shape, listed, retrieved, updated and
renewed like any other (their billing state and their period end on the timeline included;
advancing the clock past it renews them all). What the create paths also do is left out,
because a fixture of existing objects has no history: no events (so no webhooks), no invoices
(``latest_invoice`` is null), no request-log entries, no idempotency keys.
"""

from __future__ import annotations

import gc
import heapq
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from stripe_emulator import objects
from stripe_emulator.ids import invoice_prefix
from stripe_emulator.state import Record, Store

MAX_COUNT = 2_000_000


class BulkError(ValueError):
    """A bulk request that cannot be carried out (nothing was made)."""


@dataclass(frozen=True, slots=True)
class BulkSubscriptions:
    """What :func:`seed_subscriptions` makes (the admin body's fields).

    ``customer_id``, ``subscription_id`` and ``item_id`` are :meth:`str.format` patterns of
    ``i`` (``"cus_scale{i:09d}"``). Subscription ``i`` is on ``price_overrides[i]`` if given,
    else on ``prices[i % len(prices)]``; every price must be recurring, in one currency and at
    one interval. ``created`` defaults to the emulator's now.
    """

    count: int
    customer_id: str
    subscription_id: str
    item_id: str
    prices: tuple[str, ...]
    current_period_start: int
    current_period_end: int
    start: int = 0
    price_overrides: tuple[tuple[int, str], ...] = ()
    created: int | None = None


def seed_subscriptions(store: Store, now: int, bulk: BulkSubscriptions) -> Record:
    """Make ``bulk``'s customers, subscriptions and items directly in ``store``.

    Checked first, so a refused request makes nothing: the ids are new and distinct, the
    prices exist and agree, the period is not empty and ends after ``now``. Answers
    ``{"customers", "subscriptions", "first": [customer id, subscription id], "last": [...]}``.
    """
    if not 0 < bulk.count <= MAX_COUNT:
        raise BulkError(f"`count` must be 1 to {MAX_COUNT}")
    if bulk.current_period_end <= bulk.current_period_start:
        raise BulkError("`current_period_end` must be after `current_period_start`")
    if bulk.current_period_end <= now:
        # It would renew them all at the next request: not a fixture any more.
        raise BulkError("`current_period_end` must be after the emulator's now")
    indexes = range(bulk.start, bulk.start + bulk.count)
    overrides = dict(bulk.price_overrides)
    if any(index not in indexes for index in overrides):
        raise BulkError("`price_overrides` names an index outside start .. start + count - 1")
    currency, interval, interval_count = _cadence(store, {*bulk.prices, *overrides.values()})
    customer_ids = _new_ids(bulk.customer_id, indexes, store.customers, "customer_id")
    if not store.deleted_customers.isdisjoint(customer_ids):
        raise BulkError("`customer_id` gives the id of a deleted customer")
    subscription_ids = _new_ids(
        bulk.subscription_id, indexes, store.subscriptions, "subscription_id"
    )
    item_ids = _new_ids(bulk.item_id, indexes, store.subscription_items, "item_id")

    created = now if bulk.created is None else bulk.created
    period = (bulk.current_period_start, bulk.current_period_end)
    customer_template = objects.customer("", created, {}, "")
    customer_template["currency"] = currency  # Stripe fixes it on the first subscription
    subscription_template = objects.subscription(
        "",
        created,
        "",
        currency,
        {"billing_cycle_anchor": period[0], "status": "active"},
    )
    item_template = objects.subscription_item("", created, "", "", 1, {}, period)
    # Each object is a copy of its template with its own ids and metadata. The other nested
    # values (all alike) are shared between the copies, which halves the memory of a million:
    # safe because the emulator replaces a customer's or subscription's nested field, never
    # changes it in place (invoices, which it does change in place, are not made here).
    timeline = store.timeline
    with _cyclic_collection_paused():
        for position, index in enumerate(indexes):
            customer_id = customer_ids[position]
            subscription_id = subscription_ids[position]
            item_id = item_ids[position]
            customer = dict(customer_template)
            customer.update(id=customer_id, invoice_prefix=invoice_prefix(), metadata={})
            store.add_customer(customer)
            subscription = dict(subscription_template)
            subscription.update(id=subscription_id, customer=customer_id, metadata={})
            store.add_subscription(subscription)
            item = dict(item_template)
            item.update(
                id=item_id,
                subscription=subscription_id,
                price=overrides.get(index) or bulk.prices[index % len(bulk.prices)],
                metadata={},
            )
            store.subscription_items[item_id] = item
            store.items_of[subscription_id] = [item_id]
            store.billing[subscription_id] = {
                "anchor": period[0],
                "periods": 0,
                "period_start": period[0],
                "period_end": period[1],
                "interval": interval,
                "interval_count": interval_count,
            }
            timeline.append((period[1], subscription_id))
    heapq.heapify(timeline)  # once, rather than a push per subscription
    # Out of the collector's sight for good: a full collection would otherwise walk these
    # millions of objects, a pause of seconds in the middle of whatever runs next. Freed ones
    # are still freed (by reference counting); only a cycle among them would not be.
    gc.freeze()
    return {
        "customers": bulk.count,
        "subscriptions": bulk.count,
        "first": [customer_ids[0], subscription_ids[0]],
        "last": [customer_ids[-1], subscription_ids[-1]],
    }


@contextmanager
def _cyclic_collection_paused() -> Iterator[None]:
    """Millions of new dicts set the cyclic collector off again and again, each pass walking
    everything made so far: most of a bulk seed's time. None of it is garbage, so it waits."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def _cadence(store: Store, price_ids: set[str]) -> tuple[str, str, int]:
    """The one currency, interval and interval count of ``price_ids``."""
    if not price_ids:
        raise BulkError("`prices` must name at least one price")
    cadences: set[tuple[str, str, int]] = set()
    for price_id in sorted(price_ids):
        price = store.prices.get(price_id)
        if price is None:
            raise BulkError(f"no price {price_id}")
        if price["recurring"] is None:
            raise BulkError(f"price {price_id} is not recurring")
        recurring = price["recurring"]
        cadences.add((price["currency"], recurring["interval"], recurring["interval_count"]))
    if len(cadences) > 1:
        raise BulkError("the prices must share currency and billing interval")
    return cadences.pop()


def _new_ids(pattern: str, indexes: range, existing: dict[str, Any], name: str) -> list[str]:
    try:
        ids = [pattern.format(i=index) for index in indexes]
    except (KeyError, IndexError, ValueError) as error:
        raise BulkError(f"`{name}` must be a pattern of {{i}}: {error}") from error
    if len(set(ids)) != len(ids):
        raise BulkError(f"`{name}` must give each index its own id (use {{i}})")
    taken = next((object_id for object_id in ids if object_id in existing), None)
    if taken is not None:
        raise BulkError(f"`{name}` gives {taken}, which exists")
    return ids
