"""Subscriptions over emulator time: renewals and their invoices, trials ending, cancels,
payment retries and expiries.

Everything time-driven sits on one timeline (``Store.timeline``, a heap of ``(time, id)``), which
:func:`roll_subscriptions` works through in time order whenever emulator time moves (each
request, each clock advance). An entry names a subscription or an invoice and may be stale:
each is checked against its object before anything happens. Periods themselves are computed in
:mod:`stripe_emulator.periods`.

When emulator time reaches a subscription's ``period_end``:

* first, a subscription schedule's phase ending then puts the next phase's items on it
  (:mod:`stripe_emulator.schedules`), so that what follows bills them;
* ``cancel_at`` is due (``cancel_at_period_end=true``, or a ``cancel_at`` inside the period,
  which ended the period there) -> ``status: canceled``, ``ended_at`` = ``cancel_at``,
  ``cancellation_details.reason: cancellation_requested``;
* otherwise the next period starts (a trial's end starts the first paid one: ``trialing`` ->
  ``active``) and is invoiced at once: ``billing_reason: subscription_cycle``, one line per item
  at the price the item has at that instant times its quantity, for the new period, plus the
  subscription's pending invoice items (prorations); the invoice is then finalized and
  collected (:mod:`stripe_emulator.payments`). If the clock jumped over several periods, each one is
  renewed and invoiced in turn, at its own time. As on Stripe, the invoice's
  ``period_start``/``period_end`` are the period that just ended, its lines' ``period`` the new
  one.

Other subscription events: a pending update expires (``pending_update.expires_at``: dropped,
its invoice voided) and an ``incomplete`` subscription whose first invoice was not paid within
23 h becomes ``incomplete_expired`` (invoice voided).

The invoice of a renewal is finalized at once, or, when webhook endpoints exist, stays a
draft for an hour and is finalized and collected then (see payments.py). Invoice events are
that finalization, payment retries and ``send_invoice`` due dates.

Each timeline entry is an event-recording operation of its own at its own time, with no
request (:mod:`stripe_emulator.events`): a renewal records ``customer.subscription.updated``
(the old period in ``previous_attributes``), then its invoice's events.
"""

from __future__ import annotations

import gc
import heapq

from stripe_emulator import invoicing, payments, periods, recorder, schedules
from stripe_emulator.state import Record, Store

INCOMPLETE_TTL = 23 * 3600


def roll_subscriptions(store: Store, now: int) -> int:
    """Apply every timeline event due at or before ``now``; return how many were applied."""
    timeline = store.timeline
    if not timeline or timeline[0][0] > now:
        return 0
    # A clock jump can renew thousands of subscriptions at once, each making an invoice of some
    # thirty containers: the cyclic garbage collector would run over the whole heap again and
    # again (a third of the time). Nothing made here is cyclic, so it waits until the end.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _roll(store, timeline, now)
    finally:
        if collecting:
            gc.enable()


def _roll(store: Store, timeline: list[tuple[int, str]], now: int) -> int:
    applied = 0
    events = store.events
    while timeline and timeline[0][0] <= now:
        when, object_id = heapq.heappop(timeline)
        events.begin(when)  # each entry is an operation of its own, at its own time
        try:
            applied += _due(store, object_id, when)
        finally:
            events.end()
    return applied


def _due(store: Store, object_id: str, when: int) -> bool:
    if object_id.startswith("in_"):
        return payments.invoice_due(store, object_id, when)
    if object_id.startswith("sub_sched_"):
        return schedules.due(store, object_id, when)
    subscription = store.subscriptions.get(object_id)
    state = store.billing.get(object_id)
    if subscription is None or state is None or subscription["status"] == "canceled":
        return False
    recorder.subscription(store, subscription)
    return _subscription_due(store, subscription, state, when)


def _subscription_due(store: Store, subscription: Record, state: Record, when: int) -> bool:
    if state.get("incomplete_expires_at") == when:
        if subscription["status"] != "incomplete":
            return False
        _incomplete_expired(store, subscription, when)
        return True
    if state.get("pending_expires_at") == when:
        payments.drop_pending_update(store, subscription, when)
        acted = True
    else:
        acted = False
    if state["period_end"] == when:
        if subscription["status"] == "incomplete_expired":
            return acted
        _period_ended(store, subscription, state)
        return True
    return acted


def _incomplete_expired(store: Store, subscription: Record, when: int) -> None:
    """Stripe's rule: a first invoice not paid within 23 h ends the subscription."""
    state = store.billing[subscription["id"]]
    state.pop("incomplete_expires_at", None)
    subscription.update(status="incomplete_expired", ended_at=when)
    latest = store.invoices.get(subscription["latest_invoice"] or "")
    if latest is not None and latest["status"] == "open":
        payments.void(store, latest, when)


def _period_ended(store: Store, subscription: Record, state: Record) -> None:
    boundary: int = state["period_end"]
    # A schedule's phase ending here takes over first: the renewal bills the new phase's items.
    schedules.period_ending(store, subscription, boundary)
    cancel_at = subscription["cancel_at"]
    if cancel_at is not None and cancel_at <= boundary:
        requested = subscription["canceled_at"]  # when the cancel was asked for
        payments.end_subscription(store, subscription, cancel_at, "cancellation_requested")
        subscription.update(canceled_at=requested or cancel_at, cancel_at=cancel_at)
        return
    if state.get("pending_change") is not None:
        payments.drop_pending_update(store, subscription, boundary)
    previous = (state["period_start"], boundary)
    if subscription["status"] == "trialing":
        subscription["status"] = "active"
    periods.advance(store, subscription)
    period = (state["period_start"], state["period_end"])
    cycle = invoicing.cycle_lines(
        store,
        subscription["id"],
        invoicing.current_items(store, subscription["id"]),
        period,
        full_end=periods.natural_end(state),
    )
    draft = invoicing.compose(
        store,
        subscription,
        now=boundary,
        billing_reason="subscription_cycle",
        period=previous,
        cycle=cycle,
    )
    if payments.holds_renewals(store):  # finalized and collected an hour later
        payments.hold_draft(store, draft, boundary)
        return
    invoice = payments.commit(store, draft, boundary)
    # An unpaid subscription keeps invoicing, but Stripe stops attempting payments.
    payments.collect(store, invoice, boundary, attempt=subscription["status"] != "unpaid")
