"""Updating a subscription: ``POST /v1/subscriptions/{id}``.

Item changes (price, quantity, added and deleted items), ``trial_end`` (a timestamp or ``now``)
and ``billing_cycle_anchor[type]=now`` are planned, billed and applied by
:mod:`stripe_emulator.changes` (prorations per ``proration_behavior``, default
``create_prorations``, at ``proration_date`` if given: an integer within the current period,
else a 400 naming it). When the change makes an invoice at once (``always_invoice`` with
prorations, a new billing interval, the cycle or a trial ending now) and the subscription
charges automatically, ``payment_behavior`` decides what happens if the payment fails:

* ``allow_incomplete`` (default): the update is made, the invoice stays ``open`` (retried per
  the dunning settings) and the subscription becomes ``past_due``;
* ``error_if_incomplete``: a 402 ``card_error`` (``card_declined``) and nothing changes: no item
  change, no invoice (the emulator never stores it; its number is not used), no invoice items;
* ``pending_if_incomplete``: the update is not applied; the subscription's ``pending_update``
  shows it, and the invoice stays ``open``. Paying that invoice applies the update; at
  ``pending_update.expires_at`` (the period's end, at most 23 h later) it is dropped and the
  invoice voided. Only the parameters Stripe allows with pending updates are accepted
  (``items[n][id|price|quantity]``, ``proration_behavior``, ``proration_date``,
  ``billing_cycle_anchor``, ``trial_end``, ``metadata``, ``payment_behavior``, ``expand``):
  any other is a 400 naming it. Not available with ``send_invoice`` (as on Stripe);
* ``default_incomplete``: the update is made and the invoice is finalized without a payment
  attempt (Stripe awaits the confirmation of its payment intent); the subscription is
  ``past_due`` until it is paid (``POST /_emulator/payments/succeed``, or
  ``POST /v1/invoices/{id}/pay``).

A ``send_invoice`` subscription's invoice is simply left ``open`` with its ``due_date``.

``discounts`` (``[{coupon}]`` or ``[{discount}]`` to keep one the subscription has) replaces the
subscription's discounts, ``""`` clears them (:mod:`stripe_emulator.discounts`); what the same
update bills is discounted by the new ones.

``cancel_at`` (a timestamp, ``min_period_end``/``max_period_end``, or ``""`` to unset) ends the
subscription at that time: a ``cancel_at`` inside the current period ends the period there
(no credit is made for the cut-off time), a later one lets renewals run until the period it
falls in, which is cut short and billed pro rata. ``cancel_at_period_end`` is ``cancel_at`` at
the current period's end; the two cannot be sent together. Neither can be sent while a
subscription schedule manages the subscription (Stripe's 400 names the schedule; its
``end_behavior`` decides); ``items`` can, and the schedule's next phase replaces them.
"""

from __future__ import annotations

from typing import Any

from stripe_emulator import (
    cards,
    changes,
    discounts,
    invoicing,
    payments,
    pending_updates,
    periods,
    recorder,
)
from stripe_emulator.errors import card_declined, invalid, subscription_requires_action
from stripe_emulator.objects import render_subscription
from stripe_emulator.params import (
    UNSET,
    Arr,
    Bool,
    Enum,
    Int,
    IntOr,
    Metadata,
    Obj,
    Str,
    schema,
)
from stripe_emulator.resources.common import Ctx, Endpoint, metadata_for_update, only_one_of
from stripe_emulator.resources.subscriptions import (
    DISCOUNTS,
    FEEDBACK,
    MAX_ITEMS,
    PRORATION,
    schedule_cancel,
    set_cancellation_details,
    subscription_of,
)
from stripe_emulator.state import Record, Store

PAYMENT_BEHAVIORS = (
    "allow_incomplete",
    "default_incomplete",
    "error_if_incomplete",
    "pending_if_incomplete",
)
UPDATE = schema(
    {
        "billing_cycle_anchor": Obj({"type": Enum("now", "unchanged", required=True)}),
        "cancel_at": IntOr("max_billed_until", "max_period_end", "min_period_end", emptyable=True),
        "cancel_at_period_end": Bool(),
        "cancellation_details": Obj({"comment": Str(emptyable=True), "feedback": FEEDBACK}),
        "description": Str(emptyable=True),
        "discounts": DISCOUNTS,
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
        "payment_behavior": Enum(*PAYMENT_BEHAVIORS),
        "proration_behavior": PRORATION,
        "proration_date": Int(),
        "trial_end": IntOr("now"),
    }
)
# What Stripe accepts with payment_behavior=pending_if_incomplete.
PENDING_PARAMS = frozenset(
    {
        "billing_cycle_anchor",
        "expand",
        "items",
        "metadata",
        "payment_behavior",
        "proration_behavior",
        "proration_date",
        "trial_end",
    }
)
PENDING_ITEM_PARAMS = frozenset({"id", "price", "quantity"})
BILLING_PARAMS = ("items", "trial_end", "billing_cycle_anchor")


def _check_pending_params(params: dict[str, Any], record: Record) -> None:
    allowed = ", ".join(sorted(PENDING_PARAMS))
    message = (
        "When `payment_behavior` is `pending_if_incomplete`, you can only pass these "
        f"parameters: {allowed} (and items[][id|price|quantity]); got "
    )
    for key in params:
        if key not in PENDING_PARAMS:
            raise invalid(message + f"{key}.", key)
    for index, item in enumerate(params.get("items", ())):
        for key in item:
            if key not in PENDING_ITEM_PARAMS:
                raise invalid(message + f"items[{index}][{key}].", f"items[{index}][{key}]")
    if record["collection_method"] == "send_invoice":
        raise invalid(
            "Pending updates are not supported for subscriptions with "
            "`collection_method=send_invoice`.",
            "payment_behavior",
        )


def _cancel_at(params: dict[str, Any], now: int) -> Any:
    """The ``cancel_at`` to set (``None`` unsets), or ``...`` when it is not changing."""
    only_one_of(params, "cancel_at", "cancel_at_period_end")
    value = params.get("cancel_at", ...)
    if value is UNSET:
        return None
    if isinstance(value, int) and value <= now:
        raise invalid(f"Invalid timestamp: cancel_at must be in the future ({value}).", "cancel_at")
    return value


def update(ctx: Ctx, params: dict[str, Any]) -> Record:
    store, now = ctx.store, ctx.now
    record = subscription_of(ctx)
    recorder.subscription(store, record)
    changes_asked = {key for key in params if key != "expand"}
    if record["status"] == "canceled" and not changes_asked <= {"metadata", "cancellation_details"}:
        raise invalid(
            "A canceled subscription can only update its cancellation_details and metadata."
        )
    if record["schedule"] is not None and (
        "cancel_at" in params or "cancel_at_period_end" in params
    ):
        raise invalid(
            f"The subscription is managed by the subscription schedule `{record['schedule']}`, "
            "and updating any cancelation behavior directly is not allowed. Please update the "
            "schedule instead."
        )
    behavior = params.get("payment_behavior", "allow_incomplete")
    if behavior == "pending_if_incomplete":
        _check_pending_params(params, record)
    cancel_at = _cancel_at(params, now)
    wanted = params.get("discounts", [])
    redeeming = discounts.resolve(store, record, wanted, record["currency"], now)

    plan = None
    bill = None
    if any(key in params for key in BILLING_PARAMS):
        plan = changes.plan(store, record, params, now)
    # The new discounts apply to what the change bills.
    redeemed = discounts.redeem(store, record, redeeming, now) if wanted != [] else None
    if plan is not None:
        bill = changes.bill(store, record, plan)
    draft = bill.invoice if bill is not None else None
    charging = record["collection_method"] == "charge_automatically"
    if draft is not None and charging and not payments.charge_would_succeed(store, draft.invoice):
        if behavior == "error_if_incomplete":  # nothing was stored: the update did not happen
            if redeemed is not None:
                discounts.undo(store, record, redeemed)
            if cards.requires_authentication(store, draft.invoice):
                raise subscription_requires_action()
            raise card_declined()
        if behavior == "pending_if_incomplete" and plan is not None:
            if "metadata" in params:
                plan.metadata = metadata_for_update(record["metadata"], params["metadata"])
            invoice = payments.commit(store, draft, now)
            pending_updates.hold(store, record, plan, invoice)
            payments.attempt_payment(store, invoice, now)
            return render_subscription(store, record)

    if plan is not None and bill is not None:
        changes.apply(store, record, plan)
        if draft is None:
            invoicing.add_pending(store, record, bill.prorations, now)
    if draft is not None:
        invoice = payments.commit(store, draft, now)
        if behavior == "default_incomplete" and charging and invoice["amount_due"] > 0:
            record["status"] = "past_due"  # no attempt: Stripe awaits the payment's confirmation
        else:
            payments.collect(store, invoice, now)
    _update_fields(store, record, params, cancel_at, now)
    return render_subscription(store, record)


def _update_fields(
    store: Store, record: Record, params: dict[str, Any], cancel_at: Any, now: int
) -> None:
    if "cancel_at_period_end" in params:
        if params["cancel_at_period_end"]:
            schedule_cancel(record, periods.natural_end(store.billing[record["id"]]), now)
        else:
            record.update(cancel_at_period_end=False, cancel_at=None, canceled_at=None)
        periods.cancel_at_changed(store, record)
    elif cancel_at is not ...:
        if cancel_at is None:
            record.update(cancel_at_period_end=False, cancel_at=None, canceled_at=None)
        else:
            if isinstance(cancel_at, str):  # min/max_period_end, max_billed_until
                cancel_at = periods.natural_end(store.billing[record["id"]])
            record.update(cancel_at_period_end=False, cancel_at=cancel_at, canceled_at=now)
        periods.cancel_at_changed(store, record)
    if "metadata" in params:
        record["metadata"] = metadata_for_update(record["metadata"], params["metadata"])
    if "description" in params:
        record["description"] = None if params["description"] is UNSET else params["description"]
    if "cancellation_details" in params:
        set_cancellation_details(record, params["cancellation_details"])


ROUTES = (Endpoint("POST", "/v1/subscriptions/{id}", UPDATE, update, "subscription"),)
