"""Subscription schedules over emulator time: their phases, and what each does to the
subscription it manages (the endpoints: :mod:`stripe_emulator.resources.subscription_schedules`).

A schedule manages one subscription, whose ``schedule`` is the schedule's id while it is
attached (``active``). Its ``phases`` follow each other without gaps, each ``[start_date,
end_date)`` with its items; ``current_phase`` is the one whose items the subscription has.
When emulator time reaches the current phase's end:

* at the subscription's period end, :func:`period_ending` (called by :mod:`stripe_emulator.billing`
  before the renewal at that instant) puts the next phase's items on the subscription without
  prorations, so that the renewal invoice bills the next phase's prices, whatever the
  subscription's items had been changed to directly;
* inside a period (the schedule's own timeline entry, ``Store.timeline``), they replace the
  items as an update would, prorated by the phase's ``proration_behavior``;
* after the last phase, ``end_behavior`` applies: ``release`` leaves the subscription on the
  last phase's items and detaches it (the schedule ``released``, ``released_subscription`` its
  id); ``cancel`` ends it, through the subscription's ``cancel_at``, which the schedule keeps at
  its last phase's end for as long as it manages it (as Stripe shows it), and the schedule
  becomes ``canceled``.

A subscription that ends in any way (canceled, dunning, its customer deleted) cancels its
schedule (``payments.end_subscription``).
"""

from __future__ import annotations

from typing import Any

from stripe_emulator import changes, invoicing, payments, periods, recorder
from stripe_emulator.state import Record, Store

OPEN = ("not_started", "active")


def item(price_id: str, quantity: int) -> Record:
    """A phase's item as Stripe shows it (``plan`` mirrors the price id)."""
    return {
        "billing_thresholds": None,
        "discounts": [],
        "metadata": {},
        "plan": price_id,
        "price": price_id,
        "quantity": quantity,
        "tax_rates": [],
    }


def phase(
    currency: str,
    start: int,
    end: int,
    items: list[Record],
    proration_behavior: str = "create_prorations",
    metadata: dict[str, str] | None = None,
) -> Record:
    """A phase with Stripe's key set; what the emulator does not model is Stripe's default."""
    return {
        "add_invoice_items": [],
        "application_fee_percent": None,
        "billing_cycle_anchor": None,
        "billing_thresholds": None,
        "collection_method": None,
        "currency": currency,
        "default_payment_method": None,
        "default_tax_rates": [],
        "description": None,
        "discounts": [],
        "end_date": end,
        "invoice_settings": None,
        "items": items,
        "metadata": metadata or {},
        "on_behalf_of": None,
        "proration_behavior": proration_behavior,
        "start_date": start,
        "transfer_data": None,
        "trial_end": None,
    }


def schedule(
    schedule_id: str,
    now: int,
    subscription: Record,
    end_behavior: str,
    metadata: dict[str, str],
    phases: list[Record],
) -> Record:
    """A schedule managing ``subscription`` (``active``; its current phase set by the caller)."""
    return {
        "id": schedule_id,
        "object": "subscription_schedule",
        "application": None,
        "billing_mode": dict(subscription["billing_mode"]),
        "canceled_at": None,
        "completed_at": None,
        "created": now,
        "current_phase": None,
        "customer": subscription["customer"],
        "customer_account": None,
        "default_settings": _default_settings(subscription),
        "end_behavior": end_behavior,
        "livemode": False,
        "metadata": metadata,
        "phases": phases,
        "released_at": None,
        "released_subscription": None,
        "status": "active",
        "subscription": subscription["id"],
        "test_clock": None,
    }


def _default_settings(subscription: Record) -> Record:
    return {
        "application_fee_percent": None,
        "automatic_tax": {"disabled_reason": None, "enabled": False, "liability": None},
        "billing_cycle_anchor": "automatic",
        "billing_thresholds": None,
        "collection_method": subscription["collection_method"],
        "default_payment_method": None,
        "description": None,
        "invoice_settings": {
            "account_tax_ids": None,
            "custom_fields": None,
            "days_until_due": subscription["days_until_due"],
            "description": None,
            "footer": None,
            "issuer": {"type": "self"},
        },
        "on_behalf_of": None,
        "transfer_data": None,
    }


def items_of(store: Store, subscription_id: str) -> list[Record]:
    """The subscription's items as a phase's items."""
    return [
        item(price_id, quantity)
        for _, price_id, quantity in invoicing.current_items(store, subscription_id)
    ]


def enter(store: Store, record: Record, index: int, at: int, behavior: str) -> None:
    """Make phase ``index`` the current one at ``at``: its items go on the subscription
    (prorated per ``behavior``), and its end goes on the timeline."""
    entered = record["phases"][index]
    record["current_phase"] = {
        "end_date": entered["end_date"],
        "start_date": entered["start_date"],
    }
    subscription = store.subscriptions[record["subscription"]]
    switch_items(store, subscription, entered["items"], behavior, at)
    store.schedule(entered["end_date"], record["id"])


def switch_items(
    store: Store, subscription: Record, wanted: list[Record], behavior: str, at: int
) -> None:
    """Give ``subscription`` the items ``wanted`` as an update at ``at`` would (an item keeps its
    id when its price stays), billing what it bills per ``behavior``."""
    current = invoicing.current_items(store, subscription["id"])
    pairs = [(entry["price"], entry["quantity"]) for entry in wanted]
    if sorted((price, quantity) for _, price, quantity in current) == sorted(pairs):
        return
    recorder.subscription(store, subscription)
    remaining = list(current)
    updates: list[dict[str, Any]] = []
    for price, quantity in pairs:
        same = next((entry for entry in remaining if entry[1] == price), None)
        if same is None:
            updates.append({"price": price, "quantity": quantity})
        else:
            remaining.remove(same)
            updates.append({"id": same[0], "quantity": quantity})
    updates += [{"id": entry[0], "deleted": True} for entry in remaining]
    plan = changes.plan(store, subscription, {"items": updates, "proration_behavior": behavior}, at)
    bill = changes.bill(store, subscription, plan)
    changes.apply(store, subscription, plan)
    if bill.invoice is None:
        invoicing.add_pending(store, subscription, bill.prorations, at)
        return
    invoice = payments.commit(store, bill.invoice, at)
    payments.collect(store, invoice, at)


def sync_cancel(store: Store, record: Record, subscription: Record, now: int) -> None:
    """Keep the subscription's ``cancel_at`` at the last phase's end while ``end_behavior`` is
    ``cancel``; take back one the schedule set when it no longer is (or is released)."""
    state = store.billing[subscription["id"]]
    set_before = state.pop("schedule_cancel_at", None)
    wanted = None
    if record["status"] == "active" and record["end_behavior"] == "cancel":
        wanted = record["phases"][-1]["end_date"]
    if wanted is not None:
        state["schedule_cancel_at"] = wanted
        if subscription["cancel_at"] != wanted:
            recorder.subscription(store, subscription)
            subscription.update(cancel_at=wanted, cancel_at_period_end=False, canceled_at=now)
            periods.cancel_at_changed(store, subscription)
    elif set_before is not None and subscription["cancel_at"] == set_before:
        recorder.subscription(store, subscription)
        subscription.update(cancel_at=None, cancel_at_period_end=False, canceled_at=None)
        periods.cancel_at_changed(store, subscription)


def release(store: Store, record: Record, now: int, *, preserve_cancel_date: bool = False) -> None:
    """Detach the schedule from its subscription, which keeps its items (and, with
    ``preserve_cancel_date``, the ``cancel_at`` the schedule set)."""
    subscription = store.subscriptions[record["subscription"]]
    recorder.subscription(store, subscription)
    record.update(
        status="released",
        released_at=now,
        released_subscription=subscription["id"],
        subscription=None,
        current_phase=None,
    )
    if preserve_cancel_date:
        store.billing[subscription["id"]].pop("schedule_cancel_at", None)
    else:
        sync_cancel(store, record, subscription, now)
    subscription["schedule"] = None


def advance(store: Store, record: Record, when: int) -> bool:
    """Move the schedule through every phase that ended at or before ``when``."""
    acted = False
    while record["status"] == "active":
        current = record["current_phase"]
        if current is None or current["end_date"] > when:
            break
        end: int = current["end_date"]
        following = next(
            (index for index, entry in enumerate(record["phases"]) if entry["start_date"] == end),
            None,
        )
        acted = True
        if following is None:
            if record["end_behavior"] == "cancel":
                break  # the subscription's cancel_at, this end, cancels it (and the schedule)
            release(store, record, end)
            break
        state = store.billing[record["subscription"]]
        at_boundary = state["period_end"] == end
        behavior = "none" if at_boundary else record["phases"][following]["proration_behavior"]
        enter(store, record, following, end, behavior)
    return acted


def period_ending(store: Store, subscription: Record, boundary: int) -> None:
    """Before the renewal at ``boundary``: the phase starting then takes over first."""
    record = store.subscription_schedules.get(subscription["schedule"] or "")
    if record is not None:
        advance(store, record, boundary)


def due(store: Store, schedule_id: str, when: int) -> bool:
    """The schedule's timeline entry: a phase ends at ``when``."""
    record = store.subscription_schedules.get(schedule_id)
    if record is None or record["status"] != "active":
        return False
    subscription = store.subscriptions[record["subscription"]]
    if subscription["status"] in ("canceled", "incomplete_expired"):
        return False
    if store.billing[subscription["id"]]["period_end"] == when:
        return False  # the subscription's renewal at that instant moves it first
    return advance(store, record, when)
