"""Pending updates (``payment_behavior=pending_if_incomplete``): a change kept aside until the
invoice it made is paid.

The planned change (:class:`changes.Plan`) is kept in the subscription's billing state with its
invoice and expiry; the subscription shows it as ``pending_update`` (the items as they would
be, ``expires_at``, ``billing_cycle_anchor``, ``trial_end``, ``metadata``) and keeps cycling as
if no update had been asked for. Paying the invoice applies the change as of the update's time;
at ``expires_at`` (the trial's or period's end, or 23 h after the update, whichever is first)
the change is dropped and the invoice voided (:func:`payments.drop_pending_update`).
"""

from __future__ import annotations

from stripe_emulator import objects
from stripe_emulator.changes import Plan, apply
from stripe_emulator.invoice_objects import pending_update
from stripe_emulator.state import Record, Store

PENDING_UPDATE_TTL = 23 * 3600


def hold(store: Store, subscription: Record, result: Plan, invoice: Record) -> None:
    """Keep ``result`` as the subscription's ``pending_update`` until ``invoice`` is paid; it
    expires at the trial's or period's end, or 23 h after the update, whichever is first."""
    state = store.billing[subscription["id"]]
    expires_at = min(state["period_end"], result.now + PENDING_UPDATE_TTL)
    state["pending_change"] = result.to_json()
    state["pending_invoice"] = invoice["id"]
    state["pending_expires_at"] = expires_at
    store.schedule(expires_at, subscription["id"])
    rendered = []
    for item in result.items:
        record = store.subscription_items.get(item["id"])
        if record is None or item["old"] is None:
            record = objects.subscription_item(
                item["id"], result.now, subscription["id"], item["price"], item["quantity"], {},
                (state["period_start"], state["period_end"]),
            )  # fmt: skip
        rendered.append(
            objects.render_item(
                store, {**record, "price": item["price"], "quantity": item["quantity"]}
            )
        )
    anchor = result.now if result.restart or result.end_trial else None
    subscription["pending_update"] = pending_update(
        {
            "billing_cycle_anchor": anchor,
            "metadata": result.metadata,
            "trial_end": result.trial_end,
        },
        rendered,
        expires_at,
    )


def apply_pending(store: Store, subscription: Record) -> None:
    """Its invoice is paid: apply the pending update (as of the update's time)."""
    state = store.billing[subscription["id"]]
    data = state.pop("pending_change", None)
    state.pop("pending_invoice", None)
    state.pop("pending_expires_at", None)
    subscription["pending_update"] = None
    if data is not None:
        apply(store, subscription, Plan.from_json(data))
