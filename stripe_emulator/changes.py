"""Changing a subscription: what an update (or a preview of one) does to its items, billing
cycle and trial, and what it bills.

A change is first *planned* (:func:`plan`: every parameter validated, nothing touched), then
*billed* (:func:`bill`: proration lines and, when the change is invoiced at once, a draft
invoice), and only then *applied* (:func:`apply`). The update endpoint decides in between,
from ``payment_behavior``, whether to apply it, refuse it (402) or keep it as the
subscription's ``pending_update`` (:mod:`stripe_emulator.pending_updates`); a preview bills the
plan and applies nothing.

What a change bills (``[s, e]`` is the current period, ``t`` the proration time):

* a price or quantity change in the same cycle: proration lines for the changed items
  (:mod:`stripe_emulator.invoicing`); ``create_prorations`` keeps them as pending invoice
  items for the next invoice, ``always_invoice`` invoices them at once
  (``billing_reason: subscription_update``, with the pending items), ``none`` makes none;
* a price of another interval, or ``billing_cycle_anchor[type]=now``: the cycle restarts now and
  an invoice is made at once with the new period's full lines, plus (unless ``none``) credits
  for the unused time of every item's old period;
* ``trial_end``: a trialing subscription's trial moves (nothing billed), ``trial_end=now``
  ends it now (the first paid period starts and is invoiced at once), and a future
  ``trial_end`` on an active subscription starts a trial now (credits for the unused time of
  the current period, unless ``none``);
* during a trial, price and quantity changes bill nothing.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from stripe_emulator import invoicing, objects, periods
from stripe_emulator.cadence import cadence, check_compatible, recurring_price
from stripe_emulator.clock import add_interval
from stripe_emulator.errors import invalid, resource_missing
from stripe_emulator.ids import new_id
from stripe_emulator.invoice_objects import LineSpec
from stripe_emulator.invoicing import Draft
from stripe_emulator.params import child
from stripe_emulator.resources.common import metadata_for_create, metadata_for_update
from stripe_emulator.state import Record, Store


@dataclass(slots=True)
class Plan:
    """A validated change (JSON-able: a pending update keeps it in the billing state).

    ``items`` are the subscription's items after the change, in order, each
    ``{"id", "price", "quantity", "old": [price, quantity] | None}`` (``old`` is ``None`` for an
    added item); ``deleted`` are ``[id, price, quantity]`` of removed ones.
    """

    subscription: str
    now: int
    at: int
    behavior: str
    items: list[dict[str, Any]]
    deleted: list[list[Any]] = field(default_factory=list)
    item_metadata: dict[str, Any] = field(default_factory=dict)
    cadence: list[Any] | None = None
    restart: bool = False
    end_trial: bool = False
    trial_end: int | None = None
    metadata: dict[str, str] | None = None

    def to_json(self) -> Record:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Record) -> Plan:
        return cls(**data)


@dataclass(slots=True)
class Bill:
    """What a plan bills: proration lines, and the invoice made at once (if any)."""

    prorations: list[LineSpec]
    invoice: Draft | None = None


def _param(prefix: str, name: str) -> str:
    return child(prefix, name) if prefix else name


def plan(
    store: Store, subscription: Record, params: dict[str, Any], now: int, prefix: str = ""
) -> Plan:
    """Validate a change of ``subscription`` (update parameters, or a preview's
    ``subscription_details`` with ``prefix``) without touching anything."""
    state = store.billing[subscription["id"]]
    start, end = state["period_start"], state["period_end"]
    at = params.get("proration_date", now)
    if "proration_date" in params and not start <= at <= end:
        raise invalid(
            f"proration_date must be within the current period ({start} to {end}).",
            _param(prefix, "proration_date"),
        )
    result = Plan(
        subscription=subscription["id"],
        now=now,
        at=at,
        behavior=params.get("proration_behavior", "create_prorations"),
        items=[
            {"id": item_id, "price": price_id, "quantity": quantity, "old": [price_id, quantity]}
            for item_id, price_id, quantity in invoicing.current_items(store, subscription["id"])
        ],
    )
    if "items" in params:
        _plan_items(store, subscription, result, params["items"], _param(prefix, "items"))
    trialing = state["periods"] < 0
    trial_end = params.get("trial_end")
    if trial_end == "now":
        result.end_trial = trialing
    elif trial_end is not None:
        if trial_end <= now:
            raise invalid(
                f"Invalid timestamp: must be in the future ({trial_end}).",
                _param(prefix, "trial_end"),
            )
        result.trial_end = trial_end
    anchor = params.get("billing_cycle_anchor", {}).get("type", "unchanged")
    if anchor == "now":
        if trialing:
            result.end_trial = True
        else:
            result.restart = True
    if result.cadence is not None and not trialing and result.trial_end is None:
        result.restart = True
    return result


def _plan_items(
    store: Store, subscription: Record, result: Plan, updates: list[dict[str, Any]], param: str
) -> None:
    by_id = {item["id"]: item for item in result.items}
    for index, update in enumerate(updates):
        name = f"{param}[{index}]"
        item_id = update.get("id")
        if item_id is None:
            if "price" not in update:
                raise invalid(
                    f"Missing required param: {name}[price].", f"{name}[price]", "parameter_missing"
                )
            recurring_price(store, update["price"], f"{name}[price]")
            added = {
                "id": new_id("si"),
                "price": update["price"],
                "quantity": update.get("quantity", 1),
                "old": None,
                "index": index,
            }
            result.items.append(added)
            if "metadata" in update:
                result.item_metadata[added["id"]] = metadata_for_create(update["metadata"])
            continue
        item = by_id.get(item_id)
        if item is None:
            raise resource_missing("subscription item", item_id, f"{name}[id]")
        if update.get("deleted"):
            del by_id[item_id]
            result.items.remove(item)
            result.deleted.append([item_id, *item["old"]])
            continue
        if "price" in update:
            recurring_price(store, update["price"], f"{name}[price]")
            item["price"], item["index"] = update["price"], index
        if "quantity" in update:
            item["quantity"] = update["quantity"]
        if "metadata" in update:
            current = store.subscription_items[item_id]["metadata"]
            result.item_metadata[item_id] = metadata_for_update(current, update["metadata"])
    if not result.items:
        raise invalid("A subscription must have at least one active price.", param)
    prices = [
        (
            f"{param}[{item['index']}][price]" if "index" in item else param,
            store.prices[item["price"]],
        )
        for item in result.items
    ]
    check_compatible(prices)
    for item in result.items:
        item.pop("index", None)
    old = cadence(
        store.prices[store.subscription_items[store.items_of[subscription["id"]][0]]["price"]]
    )
    new = cadence(prices[0][1])
    if new[0] != old[0]:
        raise invalid(
            "Currency and interval fields must match across all plans on this subscription.", param
        )
    if new[1:] != old[1:]:
        result.cadence = list(new[1:])


# Billing ----------------------------------------------------------------------------------


def _after(result: Plan) -> list[invoicing.ItemState]:
    return [(item["id"], item["price"], item["quantity"]) for item in result.items]


def new_cycle_end(store: Store, subscription: Record, result: Plan) -> int:
    """Where the first period of a cycle restarted by ``result`` ends."""
    state = store.billing[subscription["id"]]
    interval, count = result.cadence or (state["interval"], state["interval_count"])
    return add_interval(result.now, interval, count)


def bill(store: Store, subscription: Record, result: Plan, *, preview: bool = False) -> Bill:
    """The lines ``result`` bills and the invoice it makes at once (see the module docstring)."""
    state = store.billing[subscription["id"]]
    trialing = state["periods"] < 0
    if trialing and not result.end_trial:
        return Bill([])  # nothing billed yet, nothing to prorate
    new_cycle = result.restart or result.end_trial
    # (item, what it was, what it becomes): a new cycle or a new trial credits every old item.
    whole = new_cycle or result.trial_end is not None
    changed: list[tuple[str, tuple[str, int] | None, tuple[str, int] | None]] = []
    for item in result.items:
        old = None if item["old"] is None else (item["old"][0], item["old"][1])
        new = None if whole else (item["price"], item["quantity"])
        if old != new:
            changed.append((item["id"], old, new))
    changed += [
        (item_id, (price_id, quantity), None) for item_id, price_id, quantity in result.deleted
    ]
    prorations: list[LineSpec] = []
    if result.behavior != "none" and not trialing:
        period = (state["period_start"], state["period_end"])
        for item_id, old, new in changed:
            prorations += invoicing.proration_lines(
                store, subscription["id"], item_id, old, new, result.at, period
            )
    if not new_cycle:
        if result.behavior == "always_invoice" and prorations:
            return Bill(prorations, _draft(store, subscription, result, prorations, [], preview))
        return Bill(prorations)
    # The cycle restarts now: the new period's full lines are invoiced at once.
    end = new_cycle_end(store, subscription, result)
    cut = subscription["cancel_at"]
    new_period = (result.now, cut if cut is not None and result.now < cut < end else end)
    cycle = invoicing.cycle_lines(
        store, subscription["id"], _after(result), new_period, full_end=end
    )
    return Bill(prorations, _draft(store, subscription, result, prorations, cycle, preview))


def _draft(
    store: Store,
    subscription: Record,
    result: Plan,
    prorations: list[LineSpec],
    cycle: list[LineSpec],
    preview: bool,
) -> Draft:
    return invoicing.compose(
        store,
        subscription,
        now=result.now,
        billing_reason="subscription_update",
        period=(result.now, result.now),
        prorations=prorations,
        cycle=cycle,
        preview=preview,
        proration_date=result.at if preview and prorations else None,
    )


def upcoming(store: Store, subscription: Record, result: Plan, prorations: list[LineSpec]) -> Draft:
    """A preview of the next renewal's invoice as ``result`` would leave it: the pending
    invoice items, the new ``prorations``, and the next period at the items' new prices."""
    state = store.billing[subscription["id"]]
    start, end = state["period_start"], state["period_end"]
    cancel_at = subscription["cancel_at"]
    if subscription["status"] == "canceled" or (cancel_at is not None and cancel_at <= end):
        raise invalid(
            f"No upcoming invoices for customer: {subscription['customer']}",
            code="invoice_upcoming_none",
        )
    interval, count = result.cadence or (state["interval"], state["interval_count"])
    if state["periods"] < 0:
        full_end = add_interval(end, interval, count)
    else:
        full_end = add_interval(state["anchor"], interval, count * (state["periods"] + 2))
    next_end = cancel_at if cancel_at is not None and end < cancel_at < full_end else full_end
    cycle = invoicing.cycle_lines(
        store, subscription["id"], _after(result), (end, next_end), full_end=full_end
    )
    draft = invoicing.compose(
        store,
        subscription,
        now=end,
        billing_reason="subscription_cycle",
        period=(start, end),
        prorations=prorations,
        cycle=cycle,
        preview=True,
        proration_date=result.at if prorations else None,
    )
    draft.invoice["next_payment_attempt"] = (
        end if subscription["collection_method"] == "charge_automatically" else None
    )
    return draft


# Applying -----------------------------------------------------------------------------------


def apply(store: Store, subscription: Record, result: Plan) -> None:
    """Make the planned change (items, cycle, trial, pending metadata)."""
    sid = subscription["id"]
    now = result.now
    state = store.billing[sid]
    items = store.subscription_items
    deleted = {item_id for item_id, _, _ in result.deleted}
    kept = [item_id for item_id in store.items_of[sid] if item_id not in deleted]
    period = (state["period_start"], state["period_end"])
    for item in result.items:
        record = items.get(item["id"])
        if record is None or item["old"] is None:
            record = objects.subscription_item(
                item["id"], now, sid, item["price"], item["quantity"], {}, period
            )
            items[item["id"]] = record
            kept.append(item["id"])
        record["price"], record["quantity"] = item["price"], item["quantity"]
        if item["id"] in result.item_metadata:
            record["metadata"] = result.item_metadata[item["id"]]
    store.items_of[sid] = kept
    at_period_end = subscription["cancel_at_period_end"]
    if at_period_end:  # it follows the period end wherever that moves
        subscription["cancel_at"] = None
    if result.trial_end is not None and not result.end_trial:
        if state["periods"] >= 0:
            subscription.update(status="trialing", trial_start=now)
        subscription["trial_end"] = result.trial_end
        periods.set_trial_end(store, subscription, now=now, trial_end=result.trial_end)
        if result.cadence is not None:  # for the paid periods after the trial
            periods.set_interval(store, sid, result.cadence[0], result.cadence[1])
    elif result.restart or result.end_trial:
        if result.end_trial:
            subscription.update(status="active", trial_end=now)
        interval, count = result.cadence or (state["interval"], state["interval_count"])
        periods.restart(store, subscription, now=now, interval=interval, interval_count=count)
    else:
        if result.cadence is not None:  # trialing: the trial runs on, paid periods change
            periods.set_interval(store, sid, result.cadence[0], result.cadence[1])
        periods.sync_items(store, sid, state)
    if at_period_end:
        subscription["cancel_at"] = state["period_end"]
    if result.metadata is not None:
        subscription["metadata"] = result.metadata
