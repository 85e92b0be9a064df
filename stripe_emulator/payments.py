"""Collecting invoices: finalization, payment attempts, retries (dunning) and what they do to
subscriptions and customers.

The emulator has no payment methods: a payment attempt succeeds unless the customer's payments
were set to fail through the admin API (``POST /_emulator/payments/fail``, see admin.py); then
every attempt fails with ``card_declined``, retries included, until
``POST /_emulator/payments/succeed`` pays the customer's open ``charge_automatically`` invoices.

* Invoices are finalized at once (``open``, numbered ``<invoice_prefix>-<0001>`` from the
  customer's ``next_invoice_sequence``): ``invoice.created`` (the draft) and
  ``invoice.finalized`` are recorded one after the other. Except a renewal's when an enabled
  webhook endpoint exists: as on Stripe, which finalizes a subscription invoice about an hour
  after its ``invoice.created`` was delivered, it stays ``draft`` (``automatically_finalizes_at``
  set) for :data:`DRAFT_HOLD_SECONDS` of emulator time, then is finalized and collected on the
  timeline (:func:`invoice_due`). While its ``invoice.created`` is failing to reach an endpoint
  (an attempt failed, no success since), it is looked at again every hour, up to 72 h after
  it was made (:data:`DRAFT_HOLD_LIMIT_SECONDS`), as Stripe waits for a successful answer.
* The customer's balance is applied on finalization; a total at or below 0 is paid at once
  (a negative total becomes credit on the customer's ``balance``). So is an amount due below
  Stripe's minimum charge for the currency (:data:`stripe_emulator.currencies.MINIMUM_CHARGES`:
  0.50 USD, 0.30 GBP, 50 JPY...): ``amount_due`` 0, never charged (a declined card cannot
  refuse it), and the amount carried to the customer's ``balance`` as a debit
  (``ending_balance``) that the next invoice adds to its amount due.
* ``charge_automatically``: one attempt at once. ``send_invoice``: no attempt, ``due_date`` =
  finalization + ``days_until_due`` days, and the invoice stays ``open`` until paid
  (``POST /v1/invoices/{id}/pay``). As on Stripe, once such an invoice is past its due date
  unpaid its subscription becomes ``past_due`` (until it is paid; Stripe's later ``canceled`` or
  ``unpaid`` after a further deadline is not emulated).
* A failed attempt marks the customer ``delinquent`` and, for a renewal or an update's invoice,
  makes the subscription ``past_due``; the invoice is retried every
  ``retry_interval_seconds`` of emulator time up to ``retries`` times (``attempt_count``,
  ``next_payment_attempt``), after which the subscription takes the dunning ``final_status``
  (``past_due``, ``unpaid`` or ``canceled``: Stripe's "subscription status after all retries
  fail" setting). Defaults: 3 retries, 3 days apart, then ``past_due``. Retries run on the same
  timeline as renewals, so advancing the clock runs them. A first invoice
  (``subscription_create``) is not retried: its subscription is ``incomplete`` and expires
  after 23 h (:mod:`stripe_emulator.billing`); nor is a pending update's invoice.
* A paid invoice clears ``delinquent`` (once the customer owes nothing else), brings its
  subscription back to ``active`` once none of its invoices is open, and applies the pending
  update it was paying for.

Each step records its event (``invoice.paid`` and ``invoice.payment_succeeded``,
``invoice.payment_failed``, ``invoice.voided``...; see :mod:`stripe_emulator.recorder`).
"""

from __future__ import annotations

from stripe_emulator import debits, discounts, pending_updates, recorder
from stripe_emulator.currencies import minimum_charge
from stripe_emulator.invoicing import Draft, apply_balance
from stripe_emulator.state import Record, Store

DAY = 86_400
# How long a renewal invoice stays a draft when webhook endpoints exist ("about an hour").
DRAFT_HOLD_SECONDS = 3600
DRAFT_HOLD_LIMIT_SECONDS = 72 * 3600
"""The longest a renewal's draft waits for its ``invoice.created`` to be delivered."""
FINAL_STATUSES = ("past_due", "unpaid", "canceled")
# Subscription states a paid invoice brings back to active.
_OWING = ("past_due", "unpaid", "incomplete")


HOSTED_INVOICES_PATH = "/_emulator/hosted_invoices/"


def hosted_invoice_url(store: Store, invoice_id: str) -> str:
    """Where the customer sees and pays a finalized invoice (``hosted_invoice_url``): the
    emulator's own page (:mod:`stripe_emulator.hosted_invoices`), at the address its API was
    last reached at."""
    return f"{store.public_url}{HOSTED_INVOICES_PATH}{invoice_id}"


def charge_would_succeed(store: Store, invoice: Record) -> bool:
    """Whether finalizing ``invoice`` (a draft) ends with it paid: nothing to charge, an amount
    below the currency's minimum charge (carried to the balance, never charged), or a card
    that pays."""
    return invoice["amount_due"] < max(1, minimum_charge(invoice["currency"])) or (
        invoice["customer"] not in store.failing_customers
        and invoice["customer"] not in store.authenticating_customers
    )


def subscription_of(store: Store, invoice: Record) -> Record | None:
    return store.subscriptions.get(invoice["parent"]["subscription_details"]["subscription"])


def commit(store: Store, draft: Draft, now: int) -> Record:
    """Store ``draft`` and finalize it at once: it is the subscription's latest invoice."""
    invoice = store_draft(store, draft, now)
    finalize(store, invoice, now)
    return invoice


def store_draft(store: Store, draft: Draft, now: int) -> Record:
    """Store ``draft`` as a ``draft`` invoice (``invoice.created``) with its invoice items: it
    is the subscription's latest invoice."""
    return _store_draft(store, draft, now)[0]


def _store_draft(store: Store, draft: Draft, now: int) -> tuple[Record, str | None]:
    """:func:`store_draft`, and the id of its ``invoice.created`` event."""
    invoice = draft.invoice
    invoice_id = invoice["id"]
    created = recorder.invoice(store, "invoice.created", invoice=invoice)
    subscription = store.subscriptions[invoice["parent"]["subscription_details"]["subscription"]]
    store.add_invoice(invoice)
    for item in draft.new_items:
        item["invoice"] = invoice_id
        store.invoice_items[item["id"]] = item
        recorder.invoice_item(store, item)
    store.item_credits.update(draft.credits)
    store.item_discounts.update(draft.item_discounts)
    discounts.spend(subscription, draft.spent)
    if draft.swept:
        pending = store.pending_items[subscription["id"]]
        for item_id in draft.swept:
            store.invoice_items[item_id]["invoice"] = invoice_id
            pending.remove(item_id)
    subscription["latest_invoice"] = invoice_id
    billed = store.billing[subscription["id"]].setdefault("billed", {})
    for line in invoice["lines"]["data"]:
        details = line["parent"]["subscription_item_details"]
        if not details["proration"]:
            billed[details["subscription_item"]] = [invoice_id, line["id"]]
    debits.record(store, subscription["id"], draft.ledger, invoice_id)
    return invoice, created


def hold_draft(store: Store, draft: Draft, now: int) -> Record:
    """Store a renewal's ``draft`` and finalize it :data:`DRAFT_HOLD_SECONDS` later (when
    webhook endpoints exist: see :func:`holds_renewals`)."""
    invoice, created = _store_draft(store, draft, now)
    if created is not None:
        store.draft_holds[invoice["id"]] = created
    finalizes_at = now + DRAFT_HOLD_SECONDS
    invoice["automatically_finalizes_at"] = finalizes_at
    if invoice["collection_method"] == "charge_automatically":
        invoice["next_payment_attempt"] = finalizes_at
    store.schedule(finalizes_at, invoice["id"])
    return invoice


def holds_renewals(store: Store) -> bool:
    """Whether a renewal invoice stays a draft for a while: webhook endpoints exist."""
    return any(endpoint["status"] == "enabled" for endpoint in store.webhook_endpoints.values())


def finalize(store: Store, invoice: Record, now: int) -> None:
    """Finalize a stored draft: number, the customer's balance, ``due_date``; ``open``."""
    customer = store.customers[invoice["customer"]]
    minimum = minimum_charge(invoice["currency"])
    if customer["balance"] or invoice["total"] < minimum:
        recorder.customer(store, customer)  # the balance may change
    subscription = store.subscriptions[invoice["parent"]["subscription_details"]["subscription"]]
    sequence = customer["next_invoice_sequence"]
    customer["next_invoice_sequence"] = sequence + 1
    customer["balance"] = apply_balance(invoice, customer["balance"], minimum)
    invoice.update(
        number=f"{customer['invoice_prefix']}-{sequence:04d}",
        hosted_invoice_url=hosted_invoice_url(store, invoice["id"]),
        status="open",
        effective_at=now,
        webhooks_delivered_at=now,
        automatically_finalizes_at=None,
        next_payment_attempt=None,
    )
    invoice["status_transitions"]["finalized_at"] = now
    if invoice["collection_method"] == "send_invoice":
        invoice["due_date"] = now + (subscription["days_until_due"] or 0) * DAY
        store.schedule(invoice["due_date"], invoice["id"])
    recorder.invoice(store, "invoice.finalized", invoice=invoice)


def collect(store: Store, invoice: Record, now: int, *, attempt: bool = True) -> bool:
    """Collect a just-finalized invoice; ``True`` if it is paid."""
    if invoice["amount_due"] <= 0:
        mark_paid(store, invoice, now)
        return True
    if invoice["collection_method"] == "send_invoice" or not attempt:
        return False
    return attempt_payment(store, invoice, now)


def attempt_payment(store: Store, invoice: Record, now: int) -> bool:
    """Charge the customer for ``invoice``; ``True`` if it is now paid."""
    invoice["attempted"] = True
    invoice["attempt_count"] += 1
    if invoice["customer"] in store.failing_customers:
        record_failed_attempt(store, invoice, now)
        return False
    if invoice["customer"] in store.authenticating_customers:
        record_failed_attempt(store, invoice, now, needs_action=True)
        return False
    mark_paid(store, invoice, now)
    return True


def record_failed_attempt(
    store: Store, invoice: Record, now: int, *, needs_action: bool = False
) -> None:
    """An attempt that did not pay: declined, or waiting for the customer's authentication
    (``needs_action``: ``invoice.payment_action_required`` too, :mod:`stripe_emulator.cards`)."""
    _failed(store, invoice, now)
    if needs_action:
        recorder.invoice(store, "invoice.payment_action_required", invoice=invoice)


def _failed(store: Store, invoice: Record, now: int) -> None:
    customer = store.customers.get(invoice["customer"])
    if customer is not None:
        if not customer["delinquent"]:
            recorder.customer(store, customer)
        customer["delinquent"] = True
    invoice["next_payment_attempt"] = None
    _dun(store, invoice, now)
    recorder.invoice(store, "invoice.payment_failed", invoice=invoice)


def _dun(store: Store, invoice: Record, now: int) -> None:
    """After a failed attempt: the next retry, or the subscription's final status."""
    subscription = subscription_of(store, invoice)
    if subscription is None or subscription["status"] == "canceled":
        return
    state = store.billing[subscription["id"]]
    if invoice["billing_reason"] == "subscription_create" or (
        state.get("pending_invoice") == invoice["id"]
    ):
        return  # an incomplete subscription's or a pending update's invoice: not retried
    dunning = store.dunning
    if invoice["attempt_count"] <= dunning["retries"]:
        retry_at = now + int(dunning["retry_interval_seconds"])
        invoice["next_payment_attempt"] = retry_at
        store.schedule(retry_at, invoice["id"])
        if subscription["status"] in ("active", "trialing"):
            subscription["status"] = "past_due"
        return
    final = dunning["final_status"]
    if final == "canceled":
        end_subscription(store, subscription, now, "payment_failed")
    else:
        subscription["status"] = final


def mark_paid(store: Store, invoice: Record, now: int, *, out_of_band: bool = False) -> None:
    invoice.update(
        status="paid",
        amount_paid=invoice["amount_due"],
        amount_remaining=0,
        next_payment_attempt=None,
        auto_advance=False,
    )
    invoice["status_transitions"]["paid_at"] = now
    if out_of_band:
        recorder.invoice(store, "invoice.paid", invoice=invoice)
    else:
        recorder.invoice(store, "invoice.paid", "invoice.payment_succeeded", invoice=invoice)
    subscription = subscription_of(store, invoice)
    if subscription is not None:
        state = store.billing[subscription["id"]]
        if state.get("pending_invoice") == invoice["id"]:
            pending_updates.apply_pending(store, subscription)
        if subscription["status"] in _OWING and not _has_open(store, subscription["id"]):
            subscription["status"] = "trialing" if state["periods"] < 0 else "active"
            state.pop("incomplete_expires_at", None)
    customer = store.customers.get(invoice["customer"])
    if customer is not None and customer["delinquent"]:
        recorder.customer(store, customer)
        # Delinquent while a charge it owes has failed: an unattempted open invoice is not.
        unpaid = open_invoices(store, customer["id"])
        customer["delinquent"] = any(other["attempted"] for other in unpaid)


def void(store: Store, invoice: Record, now: int) -> None:
    """Void an open invoice; the customer balance it had used is given back."""
    invoice.update(status="void", next_payment_attempt=None, auto_advance=False)
    invoice["status_transitions"]["voided_at"] = now
    recorder.invoice(store, "invoice.voided", invoice=invoice)
    subscription = subscription_of(store, invoice)
    if subscription is not None:
        debits.void(store, subscription["id"], invoice["id"])
    customer = store.customers.get(invoice["customer"])
    if customer is not None and invoice["starting_balance"] != invoice["ending_balance"]:
        recorder.customer(store, customer)
        customer["balance"] += invoice["starting_balance"] - invoice["ending_balance"]


def end_subscription(store: Store, subscription: Record, now: int, reason: str) -> None:
    """Cancel ``subscription`` now (dunning's final status, or a due ``cancel_at``)."""
    subscription.update(status="canceled", canceled_at=now, ended_at=now)
    subscription["cancellation_details"] = {
        **subscription["cancellation_details"],
        "reason": reason,
    }
    drop_pending_update(store, subscription, now)
    # The schedule managing it is canceled with it (see schedules.py).
    schedule = store.subscription_schedules.get(subscription.get("schedule") or "")
    if schedule is not None and schedule["status"] in ("not_started", "active"):
        schedule.update(status="canceled", canceled_at=now, current_phase=None)


def drop_pending_update(store: Store, subscription: Record, now: int) -> None:
    """Discard a pending update and void the invoice it waited for (its expiry, or a cancel)."""
    state = store.billing[subscription["id"]]
    invoice_id = state.pop("pending_invoice", None)
    state.pop("pending_change", None)
    state.pop("pending_expires_at", None)
    subscription["pending_update"] = None
    invoice = store.invoices.get(invoice_id) if invoice_id else None
    if invoice is not None and invoice["status"] == "open":
        void(store, invoice, now)


def _has_open(store: Store, subscription_id: str) -> bool:
    invoices = store.invoices
    return any(invoices[i]["status"] == "open" for i in store.invoices_of.get(subscription_id, ()))


def open_invoices(store: Store, customer_id: str) -> list[Record]:
    """The customer's open invoices, oldest first."""
    return [
        invoice
        for invoice in store.invoices.values()
        if invoice["customer"] == customer_id and invoice["status"] == "open"
    ]


def invoice_due(store: Store, invoice_id: str, when: int) -> bool:
    """A timeline event of an invoice: a held draft's finalization, a ``send_invoice``
    invoice's due date, or a payment retry."""
    invoice = store.invoices.get(invoice_id)
    if invoice is None:
        return False
    if invoice["status"] == "draft":
        if invoice["automatically_finalizes_at"] != when:
            return False
        if _creation_not_delivered(store, invoice) and (
            when < invoice["created"] + DRAFT_HOLD_LIMIT_SECONDS
        ):
            _hold_again(store, invoice, when)
            return True
        store.draft_holds.pop(invoice["id"], None)
        _finalize_held(store, invoice, when)
        return True
    if invoice["status"] != "open":
        return False
    if invoice["collection_method"] == "send_invoice":
        return invoice["due_date"] == when and _overdue(store, invoice)
    if invoice["next_payment_attempt"] != when:
        return False
    subscription = subscription_of(store, invoice)
    recorder.subscription(store, subscription)
    if subscription is None or subscription["status"] == "canceled":
        invoice["next_payment_attempt"] = None  # Stripe stops retrying for an ended one
        return False
    attempt_payment(store, invoice, when)
    return True


def _creation_not_delivered(store: Store, invoice: Record) -> bool:
    """Whether the draft's ``invoice.created`` has failed to reach an endpoint and not reached
    them all since: Stripe finalizes a renewal an hour after every endpoint answered it, and
    waits up to 72 h while deliveries fail. (Deliveries not tried yet do not hold it: they run
    on the wall clock, and a clock advance jumps past them.)"""
    event_id = store.draft_holds.get(invoice["id"])
    event = store.events.get(event_id) if event_id is not None else None
    return event is not None and event.pending > 0 and event.failed_deliveries > 0


def _hold_again(store: Store, invoice: Record, when: int) -> None:
    """Look again an hour later (at most until the hold's limit)."""
    later = min(when + DRAFT_HOLD_SECONDS, invoice["created"] + DRAFT_HOLD_LIMIT_SECONDS)
    invoice["automatically_finalizes_at"] = later
    if invoice["collection_method"] == "charge_automatically":
        invoice["next_payment_attempt"] = later
    store.schedule(later, invoice["id"])


def _finalize_held(store: Store, invoice: Record, when: int) -> None:
    subscription = subscription_of(store, invoice)
    recorder.subscription(store, subscription)
    finalize(store, invoice, when)
    # An unpaid subscription keeps invoicing, but Stripe stops attempting payments.
    collect(
        store, invoice, when, attempt=subscription is None or subscription["status"] != "unpaid"
    )


def _overdue(store: Store, invoice: Record) -> bool:
    """Stripe's rule for ``send_invoice``: a subscription whose invoice is not paid by its due
    date becomes ``past_due`` (until it is paid)."""
    subscription = subscription_of(store, invoice)
    if subscription is None or subscription["status"] not in ("active", "trialing"):
        return False
    recorder.subscription(store, subscription)
    subscription["status"] = "past_due"
    return True


# The payments admin API -------------------------------------------------------------------------


def fail_payments(store: Store, customer_id: str) -> None:
    store.authenticating_customers.discard(customer_id)
    store.failing_customers.add(customer_id)


def succeed_payments(store: Store, customer_id: str, now: int) -> list[str]:
    """Payments succeed again; the customer's open ``charge_automatically`` invoices are paid
    now (oldest first). Returns their ids."""
    store.failing_customers.discard(customer_id)
    store.authenticating_customers.discard(customer_id)
    paid = []
    for invoice in open_invoices(store, customer_id):
        if invoice["collection_method"] == "charge_automatically":
            recorder.subscription(store, subscription_of(store, invoice))
            attempt_payment(store, invoice, now)
            paid.append(invoice["id"])
    return paid
