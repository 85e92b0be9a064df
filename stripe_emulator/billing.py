"""Subscription lifecycle over emulator time: periods, trials, renewals, scheduled cancels.

No invoices or payments are emulated, so a period ending simply starts the next one. Each
subscription's billing state is ``anchor`` (the billing cycle anchor), ``periods`` (full periods
elapsed since it) and the current ``period_start``/``period_end``; boundaries are always
computed from the anchor (see :func:`clock.add_interval`) so month-end anchors do not drift.

What happens when emulator time reaches ``period_end``:

* ``cancel_at`` is due (set by ``cancel_at_period_end=true``) -> ``status: canceled``,
  ``ended_at`` = the period end, ``cancellation_details.reason: cancellation_requested``;
* ``trialing`` -> ``active``, first paid period starts at ``trial_end`` (the anchor);
* otherwise -> the next period, repeatedly if the clock jumped over several.
"""

from __future__ import annotations

import heapq
from typing import Any

from stripe_emulator.clock import add_interval
from stripe_emulator.state import Record, Store


def start(
    store: Store,
    subscription_id: str,
    *,
    now: int,
    interval: str,
    interval_count: int,
    trial_end: int | None,
) -> tuple[int, int]:
    """Set up billing for a new subscription and return its first period."""
    if trial_end is not None:
        state: Record = {
            "anchor": trial_end,
            "periods": -1,  # the trial is the period before the first paid one
            "period_start": now,
            "period_end": trial_end,
            "interval": interval,
            "interval_count": interval_count,
        }
    else:
        state = {
            "anchor": now,
            "periods": 0,
            "period_start": now,
            "period_end": add_interval(now, interval, interval_count),
            "interval": interval,
            "interval_count": interval_count,
        }
    store.billing[subscription_id] = state
    store.schedule(state["period_end"], subscription_id)
    return state["period_start"], state["period_end"]


def restart(
    store: Store, subscription_id: str, *, now: int, interval: str, interval_count: int
) -> None:
    """Reset the billing cycle to ``now`` (what Stripe does when the price interval changes)."""
    state = store.billing[subscription_id]
    if state["periods"] < 0:
        # Still trialing: the trial keeps running; paid periods will use the new interval.
        state["interval"], state["interval_count"] = interval, interval_count
        return
    state.update(
        anchor=now,
        periods=0,
        period_start=now,
        period_end=add_interval(now, interval, interval_count),
        interval=interval,
        interval_count=interval_count,
    )
    store.subscriptions[subscription_id]["billing_cycle_anchor"] = now
    _sync_items(store, subscription_id, state)
    store.schedule(state["period_end"], subscription_id)


def current_period(store: Store, subscription_id: str) -> tuple[int, int]:
    state = store.billing[subscription_id]
    return state["period_start"], state["period_end"]


def roll_subscriptions(store: Store, now: int) -> int:
    """Apply every lifecycle event due at or before ``now``; return how many were applied."""
    timeline = store.timeline
    applied = 0
    while timeline and timeline[0][0] <= now:
        when, subscription_id = heapq.heappop(timeline)
        subscription = store.subscriptions.get(subscription_id)
        state = store.billing.get(subscription_id)
        if (
            subscription is None
            or state is None
            or subscription["status"] == "canceled"
            or state["period_end"] != when
        ):
            continue  # stale entry: the subscription changed since it was scheduled
        _period_ended(store, subscription, state)
        applied += 1
    return applied


def _period_ended(store: Store, subscription: Record, state: dict[str, Any]) -> None:
    boundary: int = state["period_end"]
    cancel_at = subscription["cancel_at"]
    if cancel_at is not None and cancel_at <= boundary:
        subscription["status"] = "canceled"
        subscription["ended_at"] = cancel_at
        subscription["cancellation_details"] = {
            **subscription["cancellation_details"],
            "reason": "cancellation_requested",
        }
        return
    if subscription["status"] == "trialing":
        subscription["status"] = "active"
    state["periods"] += 1
    periods = state["periods"]
    state["period_start"] = add_interval(
        state["anchor"], state["interval"], state["interval_count"] * periods
    )
    state["period_end"] = add_interval(
        state["anchor"], state["interval"], state["interval_count"] * (periods + 1)
    )
    _sync_items(store, subscription["id"], state)
    store.schedule(state["period_end"], subscription["id"])


def _sync_items(store: Store, subscription_id: str, state: dict[str, Any]) -> None:
    for item_id in store.items_of[subscription_id]:
        item = store.subscription_items[item_id]
        item["current_period_start"] = state["period_start"]
        item["current_period_end"] = state["period_end"]
