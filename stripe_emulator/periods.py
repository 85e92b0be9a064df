"""A subscription's billing periods: where the current one starts and ends, and why.

Each subscription's billing state (``Store.billing[id]``) is ``anchor`` (the billing cycle
anchor), ``periods`` (full periods elapsed since it; -1 while trialing, the trial being the
period before the first paid one), ``interval``/``interval_count`` and the current
``period_start``/``period_end``. Boundaries are always computed from the anchor (see
:func:`clock.add_interval`) so month-end anchors do not drift. A ``cancel_at`` inside a period
ends that period there: ``period_end`` is the natural end or ``cancel_at``, whichever is first.

Every change of ``period_end`` is mirrored on the items' ``current_period_*`` and put on the
timeline (``Store.schedule``), which is what makes :mod:`stripe_emulator.billing` act then.
"""

from __future__ import annotations

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
            "periods": -1,
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


def current_period(store: Store, subscription_id: str) -> tuple[int, int]:
    state = store.billing[subscription_id]
    return state["period_start"], state["period_end"]


def natural_end(state: Record) -> int:
    """Where the current period ends by the cycle alone (ignoring ``cancel_at``)."""
    periods: int = state["periods"]
    if periods < 0:
        return int(state["anchor"])  # the trial ends at the anchor
    return add_interval(state["anchor"], state["interval"], state["interval_count"] * (periods + 1))


def advance(store: Store, subscription: Record) -> None:
    """Start the period after the current one (a renewal, or the first paid period)."""
    state = store.billing[subscription["id"]]
    state["periods"] += 1
    periods = state["periods"]
    state["period_start"] = add_interval(
        state["anchor"], state["interval"], state["interval_count"] * periods
    )
    _set_end(store, subscription, state, natural_end(state))


def restart(
    store: Store, subscription: Record, *, now: int, interval: str, interval_count: int
) -> None:
    """Reset the billing cycle to ``now`` (a new interval, ``billing_cycle_anchor=now``, the
    end of a trial with ``trial_end=now``): the first paid period starts now."""
    state = store.billing[subscription["id"]]
    state.update(
        anchor=now, periods=0, period_start=now, interval=interval, interval_count=interval_count
    )
    subscription["billing_cycle_anchor"] = now
    _set_end(store, subscription, state, add_interval(now, interval, interval_count))


def set_trial_end(store: Store, subscription: Record, *, now: int, trial_end: int) -> None:
    """Make the current period a trial ending at ``trial_end`` (extends, shortens or starts a
    trial); the first paid period then starts at ``trial_end``."""
    state = store.billing[subscription["id"]]
    if state["periods"] >= 0:  # an active subscription starts a trial now
        state["period_start"] = now
    state.update(anchor=trial_end, periods=-1)
    subscription["billing_cycle_anchor"] = trial_end
    _set_end(store, subscription, state, trial_end)


def set_interval(store: Store, subscription_id: str, interval: str, interval_count: int) -> None:
    """A new interval for the paid periods after a trial (the trial keeps running)."""
    state = store.billing[subscription_id]
    state["interval"], state["interval_count"] = interval, interval_count


def cancel_at_changed(store: Store, subscription: Record) -> None:
    """Shorten (or give back) the current period after ``cancel_at`` was set (or unset)."""
    state = store.billing[subscription["id"]]
    _set_end(store, subscription, state, natural_end(state))


def _set_end(store: Store, subscription: Record, state: Record, end: int) -> None:
    cancel_at = subscription["cancel_at"]
    if cancel_at is not None and state["period_start"] < cancel_at < end:
        end = cancel_at
    state["period_end"] = end
    sync_items(store, subscription["id"], state)
    store.schedule(end, subscription["id"])


def sync_items(store: Store, subscription_id: str, state: Record) -> None:
    for item_id in store.items_of[subscription_id]:
        item = store.subscription_items[item_id]
        item["current_period_start"] = state["period_start"]
        item["current_period_end"] = state["period_end"]
