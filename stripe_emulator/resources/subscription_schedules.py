"""Subscription schedules: ``POST/GET /v1/subscription_schedules``,
``GET/POST /v1/subscription_schedules/{id}``, ``POST /v1/subscription_schedules/{id}/release``
and ``.../cancel``. What a schedule does over time is in :mod:`stripe_emulator.schedules`.

Creating one takes either ``from_subscription`` alone (the Dashboard's way: the schedule takes
over the subscription, one phase from its current period's start to its end with its items,
``end_behavior`` ``release``; a subscription already on a schedule, or canceled, is refused),
or ``customer`` and ``phases``, which starts a subscription on the first phase's items now
(``start_date`` absent or ``now``: a future or past start is not emulated).

``phases[n]`` take ``items[{price, quantity}]``, ``end_date`` or ``duration{interval,
interval_count}`` (neither: one interval of the phase's price), ``proration_behavior`` and
``metadata``; on update, ``start_date`` too, on the first phase only (default: the current
phase's start; later phases start where the previous one ends). Updating ``phases`` replaces
them all; the phase in effect now puts its items on the subscription at once, prorated per the
update's ``proration_behavior`` (default ``create_prorations``). Every phase's prices must share
the subscription's currency and billing interval (a phase that changes the interval is not
emulated). ``end_behavior`` is ``release`` or ``cancel``.

Releasing detaches the subscription, which keeps its items (``released``, ``released_at``,
``released_subscription``; ``preserve_cancel_date`` keeps the ``cancel_at`` an
``end_behavior=cancel`` schedule set). Canceling cancels the subscription now (``invoice_now``
and ``prorate`` are accepted but make no final invoice). Only a ``not_started`` or ``active``
schedule can be updated, released or canceled. Not emulated: ``default_settings``,
``pause_schedules``, ``billing_mode``, trials, discounts and invoice items in phases,
``subscription_schedule.*`` events.
"""

from __future__ import annotations

from typing import Any

from stripe_emulator import payments, recorder, schedules
from stripe_emulator.cadence import cadence, check_compatible, recurring_price
from stripe_emulator.clock import add_interval
from stripe_emulator.errors import invalid
from stripe_emulator.ids import new_id
from stripe_emulator.params import (
    PAGINATION,
    Arr,
    Bool,
    Enum,
    Int,
    IntOr,
    Metadata,
    Obj,
    Range,
    Str,
    schema,
)
from stripe_emulator.resources import subscriptions
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
from stripe_emulator.resources.subscriptions import MAX_ITEMS, PRORATION
from stripe_emulator.state import Record, Store

END_BEHAVIOR = Enum("cancel", "release")
MAX_PHASES = 10
ITEM = Obj({"metadata": Metadata(), "price": Str(), "quantity": Int(minimum=0)})
DURATION = Obj(
    {
        "interval": Enum("day", "month", "week", "year", required=True),
        "interval_count": Int(minimum=1),
    }
)


def _phase(*, update: bool) -> Obj:
    fields: dict[str, Any] = {
        "duration": DURATION,
        "end_date": IntOr("now") if update else Int(),
        "items": Arr(ITEM, required=True, max_items=MAX_ITEMS),
        "metadata": Metadata(),
        "proration_behavior": PRORATION,
    }
    if update:
        fields["start_date"] = IntOr("now")
    return Obj(fields)


CREATE = schema(
    {
        "customer": Str(),
        "end_behavior": END_BEHAVIOR,
        "from_subscription": Str(),
        "metadata": Metadata(),
        "phases": Arr(_phase(update=False), max_items=MAX_PHASES),
        "start_date": IntOr("now"),
    }
)
UPDATE = schema(
    {
        "end_behavior": END_BEHAVIOR,
        "metadata": Metadata(),
        "phases": Arr(_phase(update=True), max_items=MAX_PHASES),
        "proration_behavior": PRORATION,
    }
)
RELEASE = schema({"preserve_cancel_date": Bool()})
CANCEL = schema({"invoice_now": Bool(), "prorate": Bool()})
RETRIEVE = schema({})
LIST = schema({"created": Range(), "customer": Str(), **PAGINATION})


def create(ctx: Ctx, params: dict[str, Any]) -> Record:
    if "from_subscription" in params:
        return _from_subscription(ctx, params)
    for name in ("customer", "phases"):
        if name not in params:
            raise invalid(f"Missing required param: {name}.", name, "parameter_missing")
    if not params["phases"]:
        raise invalid("Missing required param: phases.", "phases", "parameter_missing")
    if params.get("start_date", "now") != "now":
        raise invalid(
            "The Stripe emulator only starts a schedule now: `start_date` must be `now` or "
            "left out.",
            "start_date",
        )
    store, now = ctx.store, ctx.now
    first = params["phases"][0]
    param = "phases[0][items][0][price]"
    if not first["items"] or "price" not in first["items"][0]:
        raise invalid(f"Missing required param: {param}.", param, "parameter_missing")
    # Checked before the subscription is made: a refused schedule makes nothing.
    expected = cadence(recurring_price(store, first["items"][0]["price"], param))
    phases = _phases(store, expected, params["phases"], now, start=now)
    created = subscriptions.create(
        Ctx(store, now, version=ctx.version),
        {
            "customer": params["customer"],
            "items": [
                {"price": entry["price"], "quantity": entry.get("quantity", 1)}
                for entry in first["items"]
            ],
        },
    )
    subscription = store.subscriptions[created["id"]]
    record = schedules.schedule(
        new_id("sub_sched"),
        now,
        subscription,
        params.get("end_behavior", "release"),
        metadata_for_create(params.get("metadata")),
        phases,
    )
    return _attach(store, record, subscription, now)


def _from_subscription(ctx: Ctx, params: dict[str, Any]) -> Record:
    store, now = ctx.store, ctx.now
    for name in ("customer", "end_behavior", "metadata", "phases", "start_date"):
        if name in params:
            raise invalid(
                f"You cannot set `{name}` if `from_subscription` is set.", "from_subscription"
            )
    subscription = lookup(
        store.subscriptions, params["from_subscription"], "subscription", "from_subscription"
    )
    if subscription["status"] in ("canceled", "incomplete_expired"):
        raise invalid(
            f"You cannot migrate a subscription with status `{subscription['status']}` to a "
            "subscription schedule.",
            "from_subscription",
        )
    if subscription["schedule"] is not None:
        raise invalid(
            "You cannot migrate a subscription that is already attached to a schedule: "
            f"`{subscription['schedule']}`.",
            "from_subscription",
        )
    state = store.billing[subscription["id"]]
    only = schedules.phase(
        subscription["currency"],
        state["period_start"],
        state["period_end"],
        schedules.items_of(store, subscription["id"]),
    )
    record = schedules.schedule(new_id("sub_sched"), now, subscription, "release", {}, [only])
    return _attach(store, record, subscription, now)


def _attach(store: Store, record: Record, subscription: Record, now: int) -> Record:
    recorder.subscription(store, subscription)
    store.subscription_schedules[record["id"]] = record
    subscription["schedule"] = record["id"]
    _enter_current(store, record, now, "create_prorations")
    schedules.sync_cancel(store, record, subscription, now)
    return record


def _enter_current(store: Store, record: Record, now: int, behavior: str) -> None:
    for index, entry in enumerate(record["phases"]):
        if entry["start_date"] <= now < entry["end_date"]:
            schedules.enter(store, record, index, now, behavior)
            return
    raise AssertionError("no phase in effect now")  # _phases makes one


def _phases(
    store: Store,
    expected: tuple[str, str, int],
    given: list[dict[str, Any]],
    now: int,
    *,
    start: int,
) -> list[Record]:
    """The phases ``given`` as records, from ``start``, their prices all of the ``expected``
    currency and interval; one of them must be in effect now."""
    if not given:
        raise invalid("Missing required param: phases.", "phases", "parameter_missing")
    result: list[Record] = []
    for index, entry in enumerate(given):
        name = f"phases[{index}]"
        if index > 0 and "start_date" in entry:
            raise invalid(
                "Only the first phase can have a `start_date`: each later phase starts where "
                "the previous one ends.",
                f"{name}[start_date]",
            )
        if not entry["items"]:
            raise invalid(
                f"Missing required param: {name}[items].", f"{name}[items]", "parameter_missing"
            )
        prices: list[tuple[str, Record]] = []
        for position, wanted in enumerate(entry["items"]):
            param = f"{name}[items][{position}][price]"
            if "price" not in wanted:
                raise invalid(f"Missing required param: {param}.", param, "parameter_missing")
            prices.append((param, recurring_price(store, wanted["price"], param)))
        check_compatible(prices)
        if cadence(prices[0][1]) != expected:
            raise invalid(
                "Every phase's prices must have the subscription's currency and billing "
                "interval (the Stripe emulator does not emulate a phase that changes them).",
                f"{name}[items]",
            )
        end = _end(entry, start, prices[0][1], name, now)
        items = [
            schedules.item(price["id"], wanted.get("quantity", 1))
            for wanted, (_, price) in zip(entry["items"], prices, strict=True)
        ]
        behavior = entry.get("proration_behavior", "create_prorations")
        metadata = metadata_for_create(entry.get("metadata"))
        result.append(schedules.phase(expected[0], start, end, items, behavior, metadata))
        start = end
    if not result[0]["start_date"] <= now < result[-1]["end_date"]:
        raise invalid(
            "The phases must cover the present: the first must have started and the last "
            "must end in the future.",
            "phases",
        )
    return result


def _cadence(store: Store, subscription: Record) -> tuple[str, str, int]:
    state = store.billing[subscription["id"]]
    return subscription["currency"], state["interval"], state["interval_count"]


def _end(entry: dict[str, Any], start: int, price: Record, name: str, now: int) -> int:
    if "end_date" in entry and "duration" in entry:
        raise invalid(
            f"You cannot set both `{name}[end_date]` and `{name}[duration]`.", f"{name}[end_date]"
        )
    if "duration" in entry:
        duration = entry["duration"]
        end = add_interval(start, duration["interval"], duration.get("interval_count", 1))
    elif "end_date" in entry:
        end = now if entry["end_date"] == "now" else entry["end_date"]
    else:
        recurring = price["recurring"]
        end = add_interval(start, recurring["interval"], recurring["interval_count"])
    if end <= start:
        raise invalid(
            f"The end_date of {name} must be after its start_date ({start}).",
            f"{name}[end_date]",
        )
    return end


def _open_schedule(ctx: Ctx, action: str) -> Record:
    record = lookup(ctx.store.subscription_schedules, ctx.path["id"], "subscription schedule")
    if record["status"] not in schedules.OPEN:
        raise invalid(
            f"You cannot {action} a subscription schedule that is currently in the "
            f"`{record['status']}` status. It must be in `not_started` or `active`."
        )
    return record


def update(ctx: Ctx, params: dict[str, Any]) -> Record:
    store, now = ctx.store, ctx.now
    record = _open_schedule(ctx, "update")
    subscription = store.subscriptions[record["subscription"]]
    if "phases" in params:
        given = params["phases"]
        first = given[0].get("start_date") if given else None
        start = record["current_phase"]["start_date"] if first is None else first
        start = now if start == "now" else start
        record["phases"] = _phases(store, _cadence(store, subscription), given, now, start=start)
        _enter_current(store, record, now, params.get("proration_behavior", "create_prorations"))
    if "end_behavior" in params:
        record["end_behavior"] = params["end_behavior"]
    if "metadata" in params:
        record["metadata"] = metadata_for_update(record["metadata"], params["metadata"])
    schedules.sync_cancel(store, record, subscription, now)
    return record


def release(ctx: Ctx, params: dict[str, Any]) -> Record:
    record = _open_schedule(ctx, "release")
    schedules.release(
        ctx.store, record, ctx.now, preserve_cancel_date=params.get("preserve_cancel_date", False)
    )
    return record


def cancel(ctx: Ctx, params: dict[str, Any]) -> Record:
    store = ctx.store
    record = _open_schedule(ctx, "cancel")
    subscription = store.subscriptions[record["subscription"]]
    recorder.subscription(store, subscription)
    store.billing[subscription["id"]].pop("schedule_cancel_at", None)
    payments.end_subscription(store, subscription, ctx.now, "cancellation_requested")
    subscription["cancel_at"] = None
    return record


def retrieve(ctx: Ctx, params: dict[str, Any]) -> Record:
    return lookup(ctx.store.subscription_schedules, ctx.path["id"], "subscription schedule")


def list_(ctx: Ctx, params: dict[str, Any]) -> Record:
    customer_id = params.get("customer")
    records = [
        record
        for record in newest_first(ctx.store.subscription_schedules)
        if (customer_id is None or record["customer"] == customer_id)
        and created_matches(record["created"], params.get("created"))
    ]
    return paginate(records, params, "/v1/subscription_schedules", "subscription schedule")


ROUTES = (
    Endpoint("POST", "/v1/subscription_schedules", CREATE, create, "subscription_schedule"),
    Endpoint("GET", "/v1/subscription_schedules", LIST, list_, "list<subscription_schedule>"),
    Endpoint("GET", "/v1/subscription_schedules/{id}", RETRIEVE, retrieve, "subscription_schedule"),
    Endpoint("POST", "/v1/subscription_schedules/{id}", UPDATE, update, "subscription_schedule"),
    Endpoint(
        "POST",
        "/v1/subscription_schedules/{id}/release",
        RELEASE,
        release,
        "subscription_schedule",
    ),
    Endpoint(
        "POST", "/v1/subscription_schedules/{id}/cancel", CANCEL, cancel, "subscription_schedule"
    ),
)
