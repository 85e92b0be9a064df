"""A benchmark fixture: many customers, each with one subscription, made in the store.

``POST /_emulator/bulk/subscriptions`` (:func:`seed_subscriptions`) makes in seconds what a
million ``POST /v1/customers`` and ``POST /v1/subscriptions`` would take hours to: customer
``i`` and its subscription ``i``, their ids from patterns (``"cus_scale{i:09d}"``), each
subscription with one item on one price. Two forms:

* by pattern (``count``): ``i`` in ``start .. start + count - 1``, every subscription
  ``active``, on a price from a list cycled by ``i`` (with sparse exceptions), all with the same
  current period;
* by row (``rows``), to mirror a seeded database row by row: each row names its ``i`` and may
  give its own ``price``, ``status`` (``active``, ``past_due`` or ``canceled``), current period
  and ``created``, the pattern form's values standing in for what it leaves out.

A ``past_due`` subscription is one whose renewal payment failed, as the payment path leaves it
(:mod:`stripe_emulator.payments`): its customer ``delinquent``, still renewing at its period
end, but with no invoice behind it (``latest_invoice`` null; a paid renewal brings it back to
``active``). A ``canceled`` one is as the cancel path leaves it: ``canceled_at`` and
``ended_at`` at the period end or the emulator's now, whichever is earlier,
``cancellation_details.reason`` ``cancellation_requested``, and off the renewal timeline; its
period may be over.

They are the objects the create paths make, of the same shape, listed, retrieved, updated and
renewed like any other (their billing state and their period end on the timeline included;
advancing the clock past it renews them all, the canceled ones excepted). What the create
paths also do is left out, because a fixture of existing objects has no history: no events (so
no webhooks), no invoices (``latest_invoice`` is null), no request-log entries, no idempotency
keys.
"""

from __future__ import annotations

import gc
import heapq
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from stripe_emulator import objects
from stripe_emulator.ids import invoice_prefix
from stripe_emulator.state import Record, Store

MAX_COUNT = 2_000_000
ROW_STATUSES = ("active", "past_due", "canceled")
ROW_FIELDS = frozenset(
    {"i", "price", "status", "current_period_start", "current_period_end", "created"}
)


class BulkError(ValueError):
    """A bulk request that cannot be carried out (nothing was made)."""


@dataclass(frozen=True, slots=True)
class BulkSubscriptions:
    """What :func:`seed_subscriptions` makes (the admin body's fields).

    ``customer_id``, ``subscription_id`` and ``item_id`` are :meth:`str.format` patterns of
    ``i`` (``"cus_scale{i:09d}"``). Exactly one of ``count`` and ``rows`` is given.

    By pattern (``count``): ``i`` in ``start .. start + count - 1``, subscription ``i`` on
    ``price_overrides[i]`` if given, else on ``prices[i % len(prices)]``, all ``active`` in
    the current period given. By row (``rows``): one subscription per row, each a mapping of
    :data:`ROW_FIELDS` (only ``i`` required), what a row leaves out as the pattern form would
    have it (``prices[i % len(prices)]``, ``active``, the period and ``created`` given here).
    Every price must be recurring, in one currency and at one interval. ``created`` defaults
    to the emulator's now.
    """

    count: int | None
    customer_id: str
    subscription_id: str
    item_id: str
    prices: tuple[str, ...]
    current_period_start: int | None
    current_period_end: int | None
    start: int = 0
    price_overrides: tuple[tuple[int, str], ...] = ()
    created: int | None = None
    rows: Sequence[Mapping[str, Any]] | None = None


def seed_subscriptions(store: Store, now: int, bulk: BulkSubscriptions) -> Record:
    """Make ``bulk``'s customers, subscriptions and items directly in ``store``.

    Checked first, so a refused request makes nothing: the ids are new and distinct, the
    prices exist and agree, each period is not empty and ends after ``now`` (but a canceled
    row's). Answers ``{"customers", "subscriptions", "first": [customer id, subscription id],
    "last": [...]}``.
    """
    if (bulk.count is None) == (bulk.rows is None):
        raise BulkError("give one of `count` and `rows`")
    if bulk.rows is not None:
        return _seed_rows(store, now, bulk, bulk.rows)
    assert bulk.count is not None
    if not 0 < bulk.count <= MAX_COUNT:
        raise BulkError(f"`count` must be 1 to {MAX_COUNT}")
    if bulk.current_period_start is None or bulk.current_period_end is None:
        raise BulkError("`current_period_start` and `current_period_end` are required")
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
    customer_ids, subscription_ids, item_ids = _all_new_ids(store, bulk, indexes)

    created = now if bulk.created is None else bulk.created
    period = (bulk.current_period_start, bulk.current_period_end)
    customer_template = _customer_template(created, currency, delinquent=False)
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
    heap_length = len(timeline)
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
    _settle(timeline, heap_length)
    return _made(customer_ids, subscription_ids)


# One parsed row: i, price, status (an index of ROW_STATUSES), period start and end, created.
_Row = tuple[int, str, int, int, int, int]
_STATUS_INDEX = {status: index for index, status in enumerate(ROW_STATUSES)}
_CANCELED = _STATUS_INDEX["canceled"]
_NOT_INTEGERS = (
    "`current_period_start`, `current_period_end` and `created` must be integers "
    "(in the row, or given for all)"
)
_EMPTY_PERIOD = "`current_period_end` must be after `current_period_start`"
_PERIOD_OVER = "`current_period_end` must be after the emulator's now (unless canceled)"


def _seed_rows(
    store: Store, now: int, bulk: BulkSubscriptions, raw_rows: Sequence[Mapping[str, Any]]
) -> Record:
    """The row form: every row read and checked, then the ids and the prices (once each
    distinct price), and only then anything made."""
    if not 0 < len(raw_rows) <= MAX_COUNT:
        raise BulkError(f"`rows` must hold 1 to {MAX_COUNT} rows")
    rows = _parse_rows(raw_rows, bulk, now)
    indexes = [row[0] for row in rows]
    if len(set(indexes)) != len(indexes):
        seen: set[int] = set()
        for repeated in indexes:
            if repeated in seen:
                break
            seen.add(repeated)
        raise BulkError(f"`rows` gives i={repeated} more than once")
    currency, interval, interval_count = _cadence(store, {row[1] for row in rows})
    customer_ids, subscription_ids, item_ids = _all_new_ids(store, bulk, indexes)

    # As in the pattern form, each object is a copy of a template (here one per status) with
    # its own ids, metadata and what its row gives; the nested values are shared, a
    # ``billing_mode`` (which shows ``created``) between the rows created in the same second.
    customers = [
        _customer_template(0, currency, delinquent=name == "past_due") for name in ROW_STATUSES
    ]
    subscriptions = []
    for name in ROW_STATUSES:
        template = objects.subscription(
            "", 0, "", currency, {"billing_cycle_anchor": 0, "status": name}
        )
        if name == "canceled":
            # What the cancel path leaves (resources/subscriptions.py: cancel).
            template["cancellation_details"] = {
                **template["cancellation_details"],
                "reason": "cancellation_requested",
            }
        subscriptions.append(template)
    item_template = objects.subscription_item("", 0, "", "", 1, {}, (0, 0))
    flexible = objects.billing_mode("flexible", 0)["flexible"]
    billing_modes: dict[int, Record] = {}
    timeline = store.timeline
    heap_length = len(timeline)
    with _cyclic_collection_paused():
        for position, (_, price, status, start, end, created) in enumerate(rows):
            customer_id = customer_ids[position]
            subscription_id = subscription_ids[position]
            item_id = item_ids[position]
            customer = dict(customers[status])
            customer.update(
                id=customer_id, created=created, invoice_prefix=invoice_prefix(), metadata={}
            )
            store.add_customer(customer)
            billing_mode = billing_modes.get(created)
            if billing_mode is None:
                billing_mode = billing_modes[created] = {
                    "flexible": flexible,
                    "type": "flexible",
                    "updated_at": created,
                }
            subscription = dict(subscriptions[status])
            subscription.update(
                id=subscription_id,
                customer=customer_id,
                created=created,
                start_date=created,
                billing_cycle_anchor=start,
                billing_mode=billing_mode,
                metadata={},
            )
            if status == _CANCELED:
                ended = min(end, now)
                subscription.update(canceled_at=ended, ended_at=ended)
            store.add_subscription(subscription)
            item = dict(item_template)
            item.update(
                id=item_id,
                created=created,
                subscription=subscription_id,
                price=price,
                current_period_start=start,
                current_period_end=end,
                metadata={},
            )
            store.subscription_items[item_id] = item
            store.items_of[subscription_id] = [item_id]
            store.billing[subscription_id] = {
                "anchor": start,
                "periods": 0,
                "period_start": start,
                "period_end": end,
                "interval": interval,
                "interval_count": interval_count,
            }
            if status != _CANCELED:
                timeline.append((end, subscription_id))
    _settle(timeline, heap_length)
    return _made(customer_ids, subscription_ids)


def _parse_rows(
    raw_rows: Sequence[Mapping[str, Any]], bulk: BulkSubscriptions, now: int
) -> list[_Row]:
    """Each row with the pattern form's values where it gives none, checked at the cost of a
    few dict lookups (its prices are checked once each, by the caller)."""
    prices = bulk.prices
    default_start = bulk.current_period_start
    default_end = bulk.current_period_end
    default_created = now if bulk.created is None else bulk.created
    statuses = _STATUS_INDEX
    fields = ROW_FIELDS
    rows: list[_Row] = []
    append = rows.append
    for number, row in enumerate(raw_rows):
        if type(row) is not dict or not fields.issuperset(row):
            raise BulkError(
                _row_error(number, row, "must be an object of " + ", ".join(sorted(fields)))
            )
        index = row.get("i")
        if type(index) is not int:
            raise BulkError(_row_error(number, row, "needs `i`, an integer"))
        price = row.get("price")
        if price is None:
            if not prices:
                raise BulkError(_row_error(number, row, "names no price and `prices` is empty"))
            price = prices[index % len(prices)]
        elif type(price) is not str:
            raise BulkError(_row_error(number, row, "`price` must be a price id"))
        status_name = row.get("status", "active")
        status = statuses.get(status_name) if type(status_name) is str else None
        if status is None:
            raise BulkError(
                _row_error(number, row, f"`status` must be one of {', '.join(ROW_STATUSES)}")
            )
        start = row.get("current_period_start", default_start)
        end = row.get("current_period_end", default_end)
        created = row.get("created", default_created)
        if type(start) is not int or type(end) is not int or type(created) is not int:
            raise BulkError(_row_error(number, row, _NOT_INTEGERS))
        if end <= start:
            raise BulkError(_row_error(number, row, _EMPTY_PERIOD))
        if end <= now and status != _CANCELED:
            # It would renew at the next request: only a canceled subscription's period is over.
            raise BulkError(_row_error(number, row, _PERIOD_OVER))
        append((index, price, status, start, end, created))
    return rows


def _row_error(number: int, row: Any, message: str) -> str:
    index = row.get("i") if isinstance(row, dict) else None
    return f"`rows[{number}]`" + (f" (i={index})" if type(index) is int else "") + f": {message}"


def _customer_template(created: int, currency: str, *, delinquent: bool) -> Record:
    customer = objects.customer("", created, {}, "")
    customer["currency"] = currency  # Stripe fixes it on the first subscription
    # A renewal's failed payment marks the customer (payments.py: _failed).
    customer["delinquent"] = delinquent
    return customer


def _settle(timeline: list[tuple[int, str]], heap_length: int) -> None:
    """Make ``timeline`` a heap again, its entries after ``heap_length`` just appended."""
    appended = len(timeline) - heap_length
    if appended * 8 < heap_length:
        # A batch onto a large timeline (a million seeded 10,000 at a time): a push each costs
        # little, where heapifying again would walk the whole timeline at every batch.
        fresh = timeline[heap_length:]
        del timeline[heap_length:]
        for entry in fresh:
            heapq.heappush(timeline, entry)
    else:
        heapq.heapify(timeline)  # once, rather than a push per subscription
    # Out of the collector's sight for good: a full collection would otherwise walk these
    # millions of objects, a pause of seconds in the middle of whatever runs next. Freed ones
    # are still freed (by reference counting); only a cycle among them would not be.
    gc.freeze()


def _made(customer_ids: list[str], subscription_ids: list[str]) -> Record:
    return {
        "customers": len(customer_ids),
        "subscriptions": len(subscription_ids),
        "first": [customer_ids[0], subscription_ids[0]],
        "last": [customer_ids[-1], subscription_ids[-1]],
    }


def _all_new_ids(
    store: Store, bulk: BulkSubscriptions, indexes: Sequence[int]
) -> tuple[list[str], list[str], list[str]]:
    customer_ids = _new_ids(bulk.customer_id, indexes, store.customers, "customer_id")
    if not store.deleted_customers.isdisjoint(customer_ids):
        raise BulkError("`customer_id` gives the id of a deleted customer")
    subscription_ids = _new_ids(
        bulk.subscription_id, indexes, store.subscriptions, "subscription_id"
    )
    item_ids = _new_ids(bulk.item_id, indexes, store.subscription_items, "item_id")
    return customer_ids, subscription_ids, item_ids


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


def _new_ids(
    pattern: str, indexes: Sequence[int], existing: dict[str, Any], name: str
) -> list[str]:
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
