"""Subscriptions and subscription items.

Routes: ``POST/GET /v1/subscriptions``, ``GET/DELETE /v1/subscriptions/{id}``,
``GET /v1/subscription_items`` (``subscription`` required), ``GET /v1/subscription_items/{item}``;
updates (``POST /v1/subscriptions/{id}``) are in :mod:`.subscription_updates`, search
(``GET /v1/subscriptions/search``) in :mod:`.subscription_search`.

Creating a subscription creates its first invoice (``billing_reason: subscription_create``),
finalized and collected at once (:mod:`stripe_emulator.payments`): the first period's lines,
or with ``trial_period_days`` a 0-amount invoice with the trial's lines at 0, paid at once
(``status: trialing``). The emulator has no payment methods: a ``charge_automatically``
subscription is ``active`` once its invoice is paid, which it is unless the customer's payments
were set to fail (``POST /_emulator/payments/fail``); then it is ``incomplete`` with an open
invoice, and ``incomplete_expired`` if that is not paid within 23 h, as on Stripe. (Real
Stripe needs a payment method on the customer for the first charge; without one the
subscription stays ``incomplete``.) With ``collection_method=send_invoice`` the subscription is
``active`` with an open invoice due in ``days_until_due`` days (required with send_invoice,
refused otherwise). Items must share currency and billing interval.

``billing_mode[type]`` is ``classic`` or ``flexible`` (how credits are computed, see
:mod:`stripe_emulator.debits`); without it the request's API version decides, as on Stripe:
flexible from 2025-08-27 (the preview that made it the default, then 2025-09-30.clover),
classic before. ``billing_mode[flexible][proration_discounts]`` (``included``, the default, or
``itemized``) is how prorations show their discounts; ``discounts[n][coupon]`` redeems coupons
into the subscription's discounts (:mod:`stripe_emulator.discounts`).

Canceling (``DELETE``) ends the subscription now and discards a pending update; ``invoice_now``
and ``prorate`` are accepted but make no final invoice.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from stripe_emulator import discounts, invoicing, objects, payments, periods, recorder
from stripe_emulator.billing import INCOMPLETE_TTL
from stripe_emulator.cadence import cadence, check_compatible, recurring_price
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
    newest_first,
    paginate,
    paginate_in_order,
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
# ``discounts[n][coupon|discount]`` (promotion codes are not emulated); ``""`` is none.
DISCOUNTS = Arr(Obj({"coupon": Str(), "discount": Str()}), emptyable=True, max_items=20)

# API versions from which new subscriptions default to flexible billing mode (2025-08-27.preview,
# then 2025-09-30.clover); older versions default to classic.
FLEXIBLE_BY_DEFAULT_SINCE = "2025-08-27"

CREATE = schema(
    {
        "billing_mode": Obj(
            {
                "flexible": Obj({"proration_discounts": Enum("included", "itemized")}),
                "type": Enum("classic", "flexible", required=True),
            }
        ),
        "cancel_at_period_end": Bool(),
        "collection_method": COLLECTION,
        "customer": Str(required=True),
        "days_until_due": Int(minimum=0, maximum=730),
        "description": Str(),
        "discounts": DISCOUNTS,
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
        prices.append((param, recurring_price(store, item["price"], param)))
    check_compatible(prices)
    currency, interval, interval_count = cadence(prices[0][1])
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

    mode, proration_discounts = _billing_mode(params, ctx.version)
    redeeming = discounts.resolve(store, None, params.get("discounts", []), currency, now)
    trial_days = params.get("trial_period_days")
    trial_end = now + trial_days * 86_400 if trial_days else None
    subscription_id = new_id("sub")
    period = periods.start(
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
            "billing_mode": mode,
            "proration_discounts": proration_discounts,
            "collection_method": collection,
            "days_until_due": days_until_due,
            "description": params.get("description"),
            "metadata": metadata_for_create(params.get("metadata")),
            "status": "trialing" if trial_end else "active",
            "trial_start": now if trial_end else None,
            "trial_end": trial_end,
        },
    )
    discounts.redeem(store, record, redeeming, now)
    store.add_subscription(record)
    store.items_of[subscription_id] = []
    recorder.subscription(store, record, created=True)
    if customer["currency"] is None:
        recorder.customer(store, customer)  # its currency is set
    for item, (_, price) in zip(items, prices, strict=True):
        _add_item(store, now, subscription_id, price["id"], item, period)
    if params.get("cancel_at_period_end"):
        schedule_cancel(record, period[1], now)
    if customer["currency"] is None:
        customer["currency"] = currency  # Stripe fixes the customer's currency on first use
    _first_invoice(store, record, period, trial=trial_end is not None, now=now)
    return render_subscription(store, record)


def _billing_mode(params: dict[str, Any], version: str) -> tuple[str, str]:
    """``billing_mode[type]`` (else the API version's default) and
    ``billing_mode[flexible][proration_discounts]`` (default ``included``)."""
    given: dict[str, Any] = params.get("billing_mode", {})
    mode: str | None = given.get("type")
    if mode is None:
        mode = "flexible" if version[:10] >= FLEXIBLE_BY_DEFAULT_SINCE else "classic"
    flexible = given.get("flexible")
    if flexible is not None and mode != "flexible":
        raise invalid(
            "You can only pass `billing_mode[flexible]` when `billing_mode[type]` is `flexible`.",
            "billing_mode[flexible]",
        )
    return mode, (flexible or {}).get("proration_discounts", "included")


def _first_invoice(
    store: Store, record: Record, period: tuple[int, int], *, trial: bool, now: int
) -> None:
    items = invoicing.current_items(store, record["id"])
    cycle = invoicing.cycle_lines(store, record["id"], items, period, trial=trial)
    draft = invoicing.compose(
        store, record, now=now, billing_reason="subscription_create", period=(now, now), cycle=cycle
    )
    invoice = payments.commit(store, draft, now)
    if payments.collect(store, invoice, now) or record["collection_method"] == "send_invoice":
        return
    # Stripe's rule: a first payment that fails leaves the subscription incomplete for 23 h.
    record["status"] = "incomplete"
    expires_at = now + INCOMPLETE_TTL
    store.billing[record["id"]]["incomplete_expires_at"] = expires_at
    store.schedule(expires_at, record["id"])


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


def schedule_cancel(record: Record, period_end: int, now: int) -> None:
    record.update(cancel_at_period_end=True, cancel_at=period_end, canceled_at=now)


def subscription_of(ctx: Ctx) -> Record:
    return lookup(ctx.store.subscriptions, ctx.path["id"], "subscription")


def retrieve(ctx: Ctx, params: dict[str, Any]) -> Record:
    return render_subscription(ctx.store, subscription_of(ctx))


def set_cancellation_details(record: Record, details: dict[str, Any]) -> None:
    current = dict(record["cancellation_details"])
    for key in ("comment", "feedback"):
        if key in details:
            current[key] = None if details[key] is UNSET else details[key]
    record["cancellation_details"] = current


def cancel(ctx: Ctx, params: dict[str, Any]) -> Record:
    record = subscription_of(ctx)
    if record["status"] == "canceled":
        # Stripe treats a canceled subscription as gone for this endpoint.
        raise resource_missing("subscription", record["id"])
    recorder.subscription(ctx.store, record)
    payments.end_subscription(ctx.store, record, ctx.now, "cancellation_requested")
    record["cancel_at"] = None
    if "cancellation_details" in params:
        set_cancellation_details(record, params["cancellation_details"])
    return render_subscription(ctx.store, record)


def list_(ctx: Ctx, params: dict[str, Any]) -> Record:
    store = ctx.store
    status = params.get("status")
    price_id = params.get("price")
    customer_id = params.get("customer")
    render = partial(render_subscription, store)
    if status == "all" and price_id is None and customer_id is None and "created" not in params:
        # Every subscription, as the drift report and reconcile page through them: the
        # O(limit) path. Stripe's default status leaves canceled ones out, so it is a filter.
        return paginate_in_order(
            store.subscriptions,
            store.subscription_order,
            params,
            "/v1/subscriptions",
            "subscription",
            render,
        )
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
        render,
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
    Endpoint("DELETE", "/v1/subscriptions/{id}", CANCEL, cancel, "subscription"),
    Endpoint("GET", "/v1/subscription_items", ITEM_LIST, list_items, "list<subscription_item>"),
    Endpoint("GET", "/v1/subscription_items/{item}", RETRIEVE, retrieve_item, "subscription_item"),
)
