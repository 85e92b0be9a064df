"""What the emulator records as events, and when (the log itself: :mod:`stripe_emulator.events`).

=================================  ==========================================================
Event                              Recorded when
=================================  ==========================================================
``customer.created``               ``POST /v1/customers``
``customer.updated``               ``POST /v1/customers/{id}`` changes something; billing
                                   changes its ``balance``, ``delinquent`` or ``currency``
                                   (a change of ``next_invoice_sequence`` alone records
                                   nothing)
``customer.deleted``               ``DELETE /v1/customers/{id}`` (the customer as it was)
``customer.tax_id.created``        a tax ID is added (also through ``tax_id_data``)
``customer.tax_id.deleted``        ``DELETE /v1/customers/{id}/tax_ids/{id}``
``product.created/updated/         the product endpoints (``price.created`` with
deleted``                          ``product_data`` follows the ``product.created``)
``price.created/updated``          the price endpoints; a lookup key transferred away also
                                   updates the price that held it
``customer.subscription.created``  ``POST /v1/subscriptions`` (the subscription as the request
                                   leaves it, before its first invoice's events)
``customer.subscription.updated``  an update changes something; a renewal (the old period in
                                   ``previous_attributes.items``); a trial ending; a payment
                                   failing or succeeding moves its status (``past_due``,
                                   ``unpaid``, back to ``active``); ``incomplete_expired``; a
                                   pending update applied or expiring
``customer.subscription.deleted``  it is canceled: ``DELETE``, a cancel at period end (or
                                   ``cancel_at``) taking effect, dunning ending in
                                   ``canceled``, its customer deleted
``invoice.created``                an invoice is made (the draft, before finalization)
``invoice.finalized``              right after (the emulator finalizes at once)
``invoice.paid``                   it is paid (a payment, a 0 or credited total, or
                                   ``paid_out_of_band``)
``invoice.payment_succeeded``      with ``invoice.paid``, unless paid out of band
``invoice.payment_failed``         a payment attempt is declined
``invoice.voided``                 an invoice is voided (expired pending update,
                                   ``incomplete_expired``)
``invoiceitem.created``            a proration becomes an invoice item
``credit_note.created``            ``POST /v1/credit_notes`` (then ``invoice.paid`` if it left
                                   an open invoice nothing to pay, ``customer.updated`` if it
                                   credited the balance)
``credit_note.updated``            ``POST /v1/credit_notes/{id}`` changes its memo or metadata
``credit_note.voided``             ``POST /v1/credit_notes/{id}/void``
=================================  ==========================================================

Not recorded: ``invoice.updated`` and the other events of objects or steps the emulator does
not model (charges, payment intents, ``customer.subscription.trial_will_end``,
``invoice.upcoming``...).

Snapshots are shallow copies: records are only ever changed by assigning their top-level keys,
except an invoice's ``status_transitions`` (copied too) and prices embedded in subscription
items (copied by :func:`objects.render_item`).
"""

from __future__ import annotations

from stripe_emulator.objects import render_invoice, render_subscription
from stripe_emulator.state import Record, Store

_CUSTOMER_QUIET = frozenset({"next_invoice_sequence"})
_PRODUCT_QUIET = frozenset({"updated"})


def _canceled(snapshot: Record) -> bool:
    return bool(snapshot["status"] == "canceled")


def customer(store: Store, record: Record | None, *, created: bool = False) -> None:
    """Watch a customer through the current operation."""
    if record is None:
        return
    customers = store.customers

    def snapshot() -> Record | None:
        return dict(record) if record["id"] in customers else None

    store.events.watch(record["id"], "customer", snapshot, created=created, quiet=_CUSTOMER_QUIET)


def subscription(store: Store, record: Record | None, *, created: bool = False) -> None:
    """Watch a subscription through the current operation."""
    if record is None:
        return
    store.events.watch(
        record["id"],
        "customer.subscription",
        lambda: render_subscription(store, record),
        created=created,
        ended=_canceled,
    )


def product(store: Store, record: Record, *, created: bool = False) -> None:
    store.events.watch(
        record["id"], "product", lambda: dict(record), created=created, quiet=_PRODUCT_QUIET
    )


def price(store: Store, record: Record, *, created: bool = False) -> None:
    store.events.watch(record["id"], "price", lambda: dict(record), created=created)


def deleted(store: Store, type_: str, record: Record) -> None:
    """``customer.deleted``, ``product.deleted``: the object as it was."""
    store.events.record(type_, dict(record))


def tax_id(store: Store, type_: str, record: Record) -> None:
    store.events.record(type_, dict(record))


def invoice_item(store: Store, item: Record) -> None:
    store.events.record("invoiceitem.created", dict(item))


def invoice_snapshot(invoice: Record) -> Record:
    return render_invoice({**invoice, "status_transitions": dict(invoice["status_transitions"])})


def invoice(store: Store, *types: str, invoice: Record) -> str | None:
    """Record ``types`` (``invoice.paid``, ``invoice.payment_succeeded``...) of ``invoice`` as
    it is now (one snapshot shared by the events); returns the last event's id."""
    snapshot = invoice_snapshot(invoice)
    event_id = None
    for type_ in types:
        event_id = store.events.record(type_, snapshot).id
    return event_id
