"""Subscriptions and subscription items.

Routes: ``POST/GET /v1/subscriptions``, ``GET/POST/DELETE /v1/subscriptions/{id}``,
``GET /v1/subscription_items`` (``subscription`` required), ``GET /v1/subscription_items/{item}``.

No payment is collected: a new subscription is ``active`` at once, or ``trialing`` with
``trial_period_days``. Real Stripe leaves a ``charge_automatically`` subscription without a
payment method ``incomplete``; with ``collection_method=send_invoice`` it is ``active`` there
too (the emulator then requires ``days_until_due``, and refuses it otherwise).
``proration_behavior`` is validated but no proration invoice is produced; the request log
records it for tests. Items must share currency and billing interval. Changing an item to a
price with another interval restarts the billing cycle now, as Stripe does.
"""

from __future__ import annotations

from typing import Any

from stripe_emulator import billing, objects
from stripe_emulator.errors import invalid, resource_missing
from stripe_emulator.ids import new_id
from stripe_emulator.objects import render_item, render_subscription
from stripe_emulator.params import (
    PAGINATION,
    UNSET,
    Arr,
    Bool,
    Enum,
    Int,
    Metadata,
    Obj,
    Range,
    Str,
    schema,
)
from stripe_emulator.resources.common import (
    Ctx,
    Endpoint,
    created_matches,
    lookup,
    metadata_for_create,
    metadata_for_update,
    newest_first,
    paginate,
)
from stripe_emulator.resources.customers import live_customer
from stripe_emulator.state import Record, Store

PRORATION = Enum("always_invoice", "create_prorations", "none")
STATUSES = (
    "active",
    "all",
    "canceled",
    "ended",
    "incomplete",
    "incomplete_expired",
    "past_due",
    "paused",
    "trialing",
    "unpaid",
)
FEEDBACK = Enum(
    "customer_service",
    "low_quality",
    "missing_features",
    "other",
    "switched_service",
    "too_complex",
    "too_expensive",
    "unused",
    emptyable=True,
)
MAX_ITEMS = 20

COLLECTION = Enum("charge_automatically", "send_invoice")

CREATE = schema(
    {
        "cancel_at_period_end": Bool(),
        "collection_method": COLLECTION,
        "customer": Str(required=True),
        "days_until_due": Int(minimum=0, maximum=730),
        "description": Str(),
        "items": Arr(
            Obj({"metadata": Metadata(), "price": Str(), "quantity": Int(minimum=0)}),
            required=True,
            max_items=MAX_ITEMS,
        ),
        "metadata": Metadata(),
        "proration_behavior": PRORATION,
        "trial_period_days": Int(minimum=0, maximum=730),
    }
)
UPDATE = schema(
    {
        "cancel_at_period_end": Bool(),
        "cancellation_details": Obj({"comment": Str(emptyable=True), "feedback": FEEDBACK}),
        "description": Str(emptyable=True),
        "items": Arr(
            Obj(
                {
                    "deleted": Bool(),
                    "id": Str(),
                    "metadata": Metadata(),
                    "price": Str(),
                    "quantity": Int(minimum=0),
                }
            ),
            max_items=MAX_ITEMS,
        ),
        "metadata": Metadata(),
        "proration_behavior": PRORATION,
    }
)
CANCEL = schema(
    {
        "cancellation_details": Obj({"comment": Str(emptyable=True), "feedback": FEEDBACK}),
        "invoice_now": Bool(),
        "prorate": Bool(),
    }
)
RETRIEVE = schema({})
LIST = schema(
    {
        "created": Range(),
        "customer": Str(),
        "price": Str(),
        "status": Enum(*STATUSES),
        **PAGINATION,
    }
)
ITEM_LIST = schema({"subscription": Str(required=True), **PAGINATION})


def _recurring_price(store: Store, price_id: str, param: str) -> Record:
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


def _cadence(price: Record) -> tuple[str, str, int]:
    recurring = price["recurring"]
    return price["currency"], recurring["interval"], recurring["interval_count"]


def _check_compatible(prices: list[tuple[str, Record]]) -> None:
    cadences = {_cadence(price) for _, price in prices}
    if len(cadences) > 1:
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


def create(ctx: Ctx, params: dict[str, Any]) -> Record:
    store, now = ctx.store, ctx.now
    customer = live_customer(store, params["customer"], "customer")
    items: list[dict[str, Any]] = params["items"]
    if not items:
        raise invalid("Missing required param: items.", "items", "parameter_missing")
    prices: list[tuple[str, Record]] = []
    for index, item in enumerate(items):
        param = f"items[{index}][price]"
        if "price" not in item:
            raise invalid(f"Missing required param: {param}.", param, "parameter_missing")
        prices.append((param, _recurring_price(store, item["price"], param)))
    _check_compatible(prices)
    currency, interval, interval_count = _cadence(prices[0][1])
    _check_customer_currency(store, customer, currency)
    collection = params.get("collection_method", "charge_automatically")
    days_until_due = params.get("days_until_due")
    if collection == "send_invoice" and days_until_due is None:
        raise invalid(
            "Missing required param: days_until_due.", "days_until_due", "parameter_missing"
        )
    if collection != "send_invoice" and days_until_due is not None:
        raise invalid(
            "You may only specify `days_until_due` when `collection_method` is `send_invoice`.",
            "days_until_due",
        )

    trial_days = params.get("trial_period_days")
    trial_end = now + trial_days * 86_400 if trial_days else None
    subscription_id = new_id("sub")
    period = billing.start(
        store,
        subscription_id,
        now=now,
        interval=interval,
        interval_count=interval_count,
        trial_end=trial_end,
    )
    record = objects.subscription(
        subscription_id,
        now,
        customer["id"],
        currency,
        {
            "billing_cycle_anchor": trial_end or now,
            "collection_method": collection,
            "days_until_due": days_until_due,
            "description": params.get("description"),
            "metadata": metadata_for_create(params.get("metadata")),
            "status": "trialing" if trial_end else "active",
            "trial_start": now if trial_end else None,
            "trial_end": trial_end,
        },
    )
    store.subscriptions[subscription_id] = record
    store.items_of[subscription_id] = []
    for item, (_, price) in zip(items, prices, strict=True):
        _add_item(store, now, subscription_id, price["id"], item, period)
    if params.get("cancel_at_period_end"):
        _schedule_cancel(record, period[1], now)
    if customer["currency"] is None:
        customer["currency"] = currency  # Stripe fixes the customer's currency on first use
    return render_subscription(store, record)


def _check_customer_currency(store: Store, customer: Record, currency: str) -> None:
    if customer["currency"] in (None, currency):
        return
    for subscription in store.subscriptions.values():
        if subscription["customer"] == customer["id"] and subscription["status"] != "canceled":
            raise invalid(
                "You cannot combine currencies on a single customer. This customer has an "
                "active subscription, subscription schedule, discount, quote, or invoice item "
                f"with currency {customer['currency']}.",
                "currency",
            )


def _add_item(
    store: Store,
    now: int,
    subscription_id: str,
    price_id: str,
    item: dict[str, Any],
    period: tuple[int, int],
) -> None:
    record = objects.subscription_item(
        new_id("si"),
        now,
        subscription_id,
        price_id,
        item.get("quantity", 1),
        metadata_for_create(item.get("metadata")),
        period,
    )
    store.subscription_items[record["id"]] = record
    store.items_of[subscription_id].append(record["id"])


def _schedule_cancel(record: Record, period_end: int, now: int) -> None:
    record.update(cancel_at_period_end=True, cancel_at=period_end, canceled_at=now)


def _subscription(ctx: Ctx) -> Record:
    return lookup(ctx.store.subscriptions, ctx.path["id"], "subscription")


def retrieve(ctx: Ctx, params: dict[str, Any]) -> Record:
    return render_subscription(ctx.store, _subscription(ctx))


def update(ctx: Ctx, params: dict[str, Any]) -> Record:
    store, now = ctx.store, ctx.now
    record = _subscription(ctx)
    changes = {key for key in params if key != "expand"}
    if record["status"] == "canceled" and not changes <= {"metadata", "cancellation_details"}:
        raise invalid(
            "A canceled subscription can only update its cancellation_details and metadata."
        )
    if "items" in params:
        _update_items(store, now, record, params["items"])
    if "cancel_at_period_end" in params:
        if params["cancel_at_period_end"]:
            _schedule_cancel(record, billing.current_period(store, record["id"])[1], now)
        else:
            record.update(cancel_at_period_end=False, cancel_at=None, canceled_at=None)
    if "metadata" in params:
        record["metadata"] = metadata_for_update(record["metadata"], params["metadata"])
    if "description" in params:
        record["description"] = None if params["description"] is UNSET else params["description"]
    if "cancellation_details" in params:
        _set_cancellation_details(record, params["cancellation_details"])
    return render_subscription(store, record)


def _update_items(store: Store, now: int, record: Record, updates: list[dict[str, Any]]) -> None:
    """Apply ``items[]`` changes: replace a price, change quantity, add or delete items."""
    subscription_id = record["id"]
    item_ids = list(store.items_of[subscription_id])
    planned: dict[str, dict[str, Any]] = {
        item_id: {"price": store.subscription_items[item_id]["price"]} for item_id in item_ids
    }
    additions: list[tuple[int, dict[str, Any]]] = []
    for index, update in enumerate(updates):
        item_id = update.get("id")
        if item_id is None:
            if "price" not in update:
                param = f"items[{index}][price]"
                raise invalid(f"Missing required param: {param}.", param, "parameter_missing")
            additions.append((index, update))
            continue
        if item_id not in planned:
            raise resource_missing("subscription item", item_id, f"items[{index}][id]")
        if update.get("deleted"):
            del planned[item_id]
        elif "price" in update:
            planned[item_id]["price"] = update["price"]
            planned[item_id]["index"] = index
    prices: list[tuple[str, Record]] = []
    for item_id, plan in planned.items():
        param = f"items[{plan['index']}][price]" if "index" in plan else "items"
        if "index" in plan:
            prices.append((param, _recurring_price(store, plan["price"], param)))
        else:
            prices.append((param, store.prices[plan["price"]]))
        plan["id"] = item_id
    for index, update in additions:
        param = f"items[{index}][price]"
        prices.append((param, _recurring_price(store, update["price"], param)))
    if not prices:
        raise invalid("A subscription must have at least one active price.", "items")
    _check_compatible(prices)

    old_cadence = _cadence(store.prices[store.subscription_items[item_ids[0]]["price"]])
    new_cadence = _cadence(prices[0][1])
    if new_cadence[0] != old_cadence[0]:
        raise invalid(
            "Currency and interval fields must match across all plans on this subscription.",
            "items",
        )
    # Apply: all validation is done, so the update cannot half-succeed.
    by_id = {update["id"]: update for update in updates if "id" in update}
    for item_id in item_ids:
        item = store.subscription_items[item_id]
        change = by_id.get(item_id)
        if change is None:
            continue
        if change.get("deleted"):
            store.items_of[subscription_id].remove(item_id)
            continue
        if "price" in change:
            item["price"] = change["price"]
        if "quantity" in change:
            item["quantity"] = change["quantity"]
        if "metadata" in change:
            item["metadata"] = metadata_for_update(item["metadata"], change["metadata"])
    period = billing.current_period(store, subscription_id)
    for _, update in additions:
        _add_item(store, now, subscription_id, update["price"], update, period)
    if new_cadence[1:] != old_cadence[1:]:
        billing.restart(
            store,
            subscription_id,
            now=now,
            interval=new_cadence[1],
            interval_count=new_cadence[2],
        )
        if record["cancel_at_period_end"]:
            record["cancel_at"] = billing.current_period(store, subscription_id)[1]


def _set_cancellation_details(record: Record, details: dict[str, Any]) -> None:
    current = dict(record["cancellation_details"])
    for key in ("comment", "feedback"):
        if key in details:
            current[key] = None if details[key] is UNSET else details[key]
    record["cancellation_details"] = current


def cancel(ctx: Ctx, params: dict[str, Any]) -> Record:
    record = _subscription(ctx)
    if record["status"] == "canceled":
        # Stripe treats a canceled subscription as gone for this endpoint.
        raise resource_missing("subscription", record["id"])
    record.update(status="canceled", canceled_at=ctx.now, ended_at=ctx.now, cancel_at=None)
    record["cancellation_details"] = {
        **record["cancellation_details"],
        "reason": "cancellation_requested",
    }
    if "cancellation_details" in params:
        _set_cancellation_details(record, params["cancellation_details"])
    return render_subscription(ctx.store, record)


def list_(ctx: Ctx, params: dict[str, Any]) -> Record:
    store = ctx.store
    status = params.get("status")
    price_id = params.get("price")
    customer_id = params.get("customer")
    records = [
        record
        for record in newest_first(store.subscriptions)
        if (customer_id is None or record["customer"] == customer_id)
        and _status_matches(record["status"], status)
        and (price_id is None or _has_price(store, record["id"], price_id))
        and created_matches(record["created"], params.get("created"))
    ]
    return paginate(
        records,
        params,
        "/v1/subscriptions",
        "subscription",
        lambda record: render_subscription(store, record),
    )


def _status_matches(actual: str, wanted: str | None) -> bool:
    if wanted is None:
        return actual != "canceled"  # Stripe's default leaves out canceled subscriptions
    if wanted == "all":
        return True
    if wanted == "ended":
        return actual in ("canceled", "incomplete_expired")
    return actual == wanted


def _has_price(store: Store, subscription_id: str, price_id: str) -> bool:
    return any(
        store.subscription_items[item_id]["price"] == price_id
        for item_id in store.items_of[subscription_id]
    )


def retrieve_item(ctx: Ctx, params: dict[str, Any]) -> Record:
    item_id = ctx.path["item"]
    item = ctx.store.subscription_items.get(item_id)
    if item is None or item_id not in ctx.store.items_of.get(item["subscription"], ()):
        raise resource_missing("subscription item", item_id)
    return render_item(ctx.store, item)


def list_items(ctx: Ctx, params: dict[str, Any]) -> Record:
    store = ctx.store
    subscription_id = params["subscription"]
    lookup(store.subscriptions, subscription_id, "subscription", "subscription")
    items = [store.subscription_items[item_id] for item_id in store.items_of[subscription_id]]
    return paginate(
        items,
        params,
        f"/v1/subscription_items?subscription={subscription_id}",
        "subscription item",
        lambda item: render_item(store, item),
    )


ROUTES = (
    Endpoint("POST", "/v1/subscriptions", CREATE, create, "subscription"),
    Endpoint("GET", "/v1/subscriptions", LIST, list_, "list<subscription>"),
    Endpoint("GET", "/v1/subscriptions/{id}", RETRIEVE, retrieve, "subscription"),
    Endpoint("POST", "/v1/subscriptions/{id}", UPDATE, update, "subscription"),
    Endpoint("DELETE", "/v1/subscriptions/{id}", CANCEL, cancel, "subscription"),
    Endpoint("GET", "/v1/subscription_items", ITEM_LIST, list_items, "list<subscription_item>"),
    Endpoint("GET", "/v1/subscription_items/{item}", RETRIEVE, retrieve_item, "subscription_item"),
)
