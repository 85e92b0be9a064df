"""Billing arithmetic: what an invoice bills, and prorations to the second.

Licensed prices are billed in advance: a period's line is the item's price *at the moment the
invoice is made* times its quantity, for the whole period (a period shortened by
``cancel_at`` is prorated like a change).

Prorations follow Stripe's per-second rule. For a change at ``t`` (the request's time, or
``proration_date``) within the period ``[s, e]``, an item whose price or quantity changes gets

* a credit ``-round(old_unit_amount * old_quantity * (e - t) / (e - s))``,
  "Unused time on <product> after <date>", and
* a debit ``round(new_unit_amount * new_quantity * (e - t) / (e - s))``,
  "Remaining time on <product> after <date>",

both with ``proration: true`` and ``period`` ``{start: t, end: e}`` (an added item only gets the
debit, a deleted one only the credit). That credit is the ``classic`` billing mode's rule; in
``flexible`` mode the credit is what was debited for that time instead, one credit per debit
(:mod:`stripe_emulator.debits`). Each line is rounded on its own to the nearest minor
unit, halves away from zero, in integer arithmetic: the same inputs always give the same
amounts, and a preview made with ``proration_date=t`` matches the update made with it to the
cent. During a trial nothing has been billed, so a change makes no proration lines (Stripe
may show 0-amount ones; the totals are the same).

A :class:`Draft` is an invoice not yet stored: the update path builds one, checks whether it
can be paid (``payment_behavior``) and only then commits it (:mod:`stripe_emulator.payments`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from stripe_emulator import currencies, debits, discounts, invoice_objects, recorder
from stripe_emulator.ids import new_id
from stripe_emulator.invoice_objects import LineSpec
from stripe_emulator.objects import is_flexible
from stripe_emulator.rounding import prorate
from stripe_emulator.state import Record, Store

# (subscription item id, price id, quantity): an item as it is, or as a change would make it.
ItemState = tuple[str, str, int]


@dataclass(slots=True)
class Draft:
    """An invoice being made: the invoice items it creates and the pending ones it takes."""

    invoice: Record
    new_items: list[Record] = field(default_factory=list)
    swept: list[str] = field(default_factory=list)
    credits: dict[str, list[Any]] = field(default_factory=dict)
    # The new invoice items' discounts (Store.item_discounts) and the once discounts it spends.
    item_discounts: dict[str, list[Any]] = field(default_factory=dict)
    spent: list[str] = field(default_factory=list)
    # The new lines (prorations, cycle) with their line ids: what they debit and credit is
    # recorded when the invoice is committed (debits.record).
    ledger: list[tuple[LineSpec, str | None]] = field(default_factory=list)


def format_date(timestamp: int) -> str:
    moment = datetime.fromtimestamp(timestamp, UTC)
    return f"{moment.day} {moment:%b} {moment.year}"


def product_name(store: Store, price: Record) -> str:
    product = store.products.get(price["product"])
    return str(product["name"]) if product is not None else str(price["product"])


TIMES = "\u00d7"  # Stripe writes "3 <multiplication sign> Pro"


def _counted(quantity: int, name: str) -> str:
    return name if quantity == 1 else f"{quantity} {TIMES} {name}"


def cycle_description(store: Store, price: Record, quantity: int) -> str:
    """``3 TIMES Pro (at $12.00 / month)``, as Stripe words a subscription line (with
    :data:`TIMES`, the multiplication sign)."""
    recurring = price["recurring"] or {}
    interval, count = recurring.get("interval", "month"), recurring.get("interval_count", 1)
    every = interval if count == 1 else f"every {count} {interval}s"
    amount = currencies.format_amount(price["currency"], price["unit_amount"])
    return f"{quantity} {TIMES} {product_name(store, price)} (at {amount} / {every})"


def current_items(store: Store, subscription_id: str) -> list[ItemState]:
    items = store.subscription_items
    return [
        (item_id, items[item_id]["price"], items[item_id]["quantity"])
        for item_id in store.items_of[subscription_id]
    ]


def cycle_lines(
    store: Store,
    subscription_id: str,
    items: Iterable[ItemState],
    period: tuple[int, int],
    *,
    trial: bool = False,
    full_end: int | None = None,
) -> list[LineSpec]:
    """One line per item for ``period``; 0 during a trial, prorated when ``full_end`` says the
    period was cut short (by ``cancel_at``)."""
    start, end = period
    specs = []
    for item_id, price_id, quantity in items:
        price = store.prices[price_id]
        if trial:
            amount = 0
            description = f"Trial period for {product_name(store, price)}"
        else:
            amount = price["unit_amount"] * quantity
            if full_end is not None and end < full_end:
                amount = prorate(amount, end - start, full_end - start)
            description = cycle_description(store, price, quantity)
        specs.append(
            LineSpec(
                amount=amount,
                currency=price["currency"],
                description=description,
                period=period,
                price=price,
                quantity=quantity,
                subscription=subscription_id,
                subscription_item=item_id,
            )
        )
    return specs


def proration_lines(
    store: Store,
    subscription_id: str,
    item_id: str,
    old: tuple[str, int] | None,
    new: tuple[str, int] | None,
    at: int,
    period: tuple[int, int],
) -> list[LineSpec]:
    """The credit for ``old`` (price id, quantity) and the debit for ``new`` after ``at``.

    In flexible billing mode the credit is one line per debit of the item's period
    (:mod:`stripe_emulator.debits`); in classic mode, ``old`` at its current price."""
    start, end = period
    when = format_date(at)
    specs = []
    subscription = store.subscriptions[subscription_id]
    if old is not None and is_flexible(subscription) and debits.tracked(store, subscription_id):
        specs += _flexible_credits(store, subscription_id, item_id, at, when)
        old = None
    for side, values in (("Unused", old), ("Remaining", new)):
        if values is None:
            continue
        price = store.prices[values[0]]
        quantity = values[1]
        amount = prorate(price["unit_amount"] * quantity, end - at, end - start)
        name = _counted(quantity, product_name(store, price))
        specs.append(
            LineSpec(
                amount=-amount if side == "Unused" else amount,
                currency=price["currency"],
                description=f"{side} time on {name} after {when}",
                period=(at, end),
                price=price,
                quantity=quantity,
                subscription=subscription_id,
                subscription_item=item_id,
                proration=True,
                credited=_billed(store, subscription_id, item_id) if side == "Unused" else None,
            )
        )
    discounts.on_prorations(store, subscription, specs, at)
    return specs


def _flexible_credits(
    store: Store, subscription_id: str, item_id: str, at: int, when: str
) -> list[LineSpec]:
    specs = []
    for credit in debits.credits(store, subscription_id, item_id, at):
        debit = credit.debit
        price = store.prices[debit["price"]]
        name = _counted(debit["quantity"], product_name(store, price))
        specs.append(
            LineSpec(
                amount=-credit.amount,
                currency=price["currency"],
                description=f"Unused time on {name} after {when}",
                period=credit.period,
                price=price,
                quantity=debit["quantity"],
                subscription=subscription_id,
                subscription_item=item_id,
                proration=True,
                credited=None if debit["line"] is None else (debit["invoice"], [debit["line"]]),
                consumes=credit.index,
                discounts=[[discount_id, -share] for discount_id, share in credit.discounts],
            )
        )
    return specs


def _billed(store: Store, subscription_id: str, item_id: str) -> tuple[str, list[str]] | None:
    """The invoice line that last billed ``item_id`` (what a credit proration gives back)."""
    billed = store.billing[subscription_id].get("billed", {}).get(item_id)
    return None if billed is None else (billed[0], [billed[1]])


def invoice_items(
    customer_id: str,
    specs: Sequence[LineSpec],
    now: int,
    credits: dict[str, list[Any]],
    item_discounts: dict[str, list[Any]],
) -> list[Record]:
    """Invoice items for proration ``specs`` (each spec then names its item); what credit
    prorations give back goes to ``credits``, their discounts to ``item_discounts``."""
    records = []
    for spec in specs:
        item_id = spec.invoice_item = new_id("ii")
        records.append(invoice_objects.invoice_item(item_id, customer_id, now, spec))
        if spec.credited is not None:
            credits[item_id] = [spec.credited[0], list(spec.credited[1])]
        if spec.discounts:
            item_discounts[item_id] = [spec.amount, [list(entry) for entry in spec.discounts]]
    return records


def add_pending(store: Store, subscription: Record, specs: Sequence[LineSpec], now: int) -> None:
    """Keep proration ``specs`` as pending invoice items for the subscription's next invoice."""
    if not specs:
        return
    items = invoice_items(
        subscription["customer"], specs, now, store.item_credits, store.item_discounts
    )
    pending = store.pending_items.setdefault(subscription["id"], [])
    for item in items:
        store.invoice_items[item["id"]] = item
        pending.append(item["id"])
        recorder.invoice_item(store, item)
    debits.record(store, subscription["id"], ((spec, None) for spec in specs), None)


def spec_of_item(store: Store, item: Record) -> LineSpec:
    """The line a (pending) invoice item becomes on an invoice."""
    credited = store.item_credits.get(item["id"])
    gross, taken = store.item_discounts.get(item["id"], [item["amount"], []])
    return LineSpec(
        amount=gross,
        currency=item["currency"],
        description=item["description"],
        period=(item["period"]["start"], item["period"]["end"]),
        price=store.prices[item["pricing"]["price_details"]["price"]],
        quantity=item["quantity"],
        subscription=item["parent"]["subscription_details"]["subscription"],
        subscription_item=item["parent"]["subscription_details"]["subscription_item"],
        proration=item["proration"],
        invoice_item=item["id"],
        credited=None if credited is None else (credited[0], list(credited[1])),
        discounts=[list(entry) for entry in taken],
        included=item["proration"] and not item["discountable"],
    )


def compose(
    store: Store,
    subscription: Record,
    *,
    now: int,
    billing_reason: str,
    period: tuple[int, int],
    prorations: Sequence[LineSpec] = (),
    cycle: Sequence[LineSpec] = (),
    sweep_pending: bool = True,
    preview: bool = False,
    proration_date: int | None = None,
) -> Draft:
    """A draft invoice of ``subscription``: its pending invoice items (oldest first), then the
    new ``prorations`` (which become invoice items), then the ``cycle`` lines.

    A preview has an ``upcoming_in_...`` id and ``il_tmp_...`` lines, and creates nothing.
    """
    customer = store.customers[subscription["customer"]]
    invoice_id = new_id("upcoming_in") if preview else new_id("in")
    line_prefix = "il_tmp" if preview else "il"
    draft = Draft({})
    specs: list[LineSpec] = []
    if sweep_pending:
        for item_id in store.pending_items.get(subscription["id"], ()):
            specs.append(spec_of_item(store, store.invoice_items[item_id]))
            draft.swept.append(item_id)
    if prorations and not preview:
        draft.new_items = invoice_items(
            customer["id"], prorations, now, draft.credits, draft.item_discounts
        )
    specs.extend(prorations)
    specs.extend(cycle)
    draft.spent = discounts.on_invoice(store, subscription, specs, now)
    lines = [invoice_objects.line_item(new_id(line_prefix), invoice_id, spec) for spec in specs]
    if not preview:
        swept = len(draft.swept)
        draft.ledger = [
            (spec, line["id"]) for spec, line in zip(specs[swept:], lines[swept:], strict=True)
        ]
    invoice = draft.invoice = invoice_objects.invoice(
        invoice_id,
        now,
        customer,
        subscription,
        {"billing_reason": billing_reason, "period": period, "proration_date": proration_date},
        lines,
    )
    invoice["customer_tax_ids"] = [
        {"type": store.tax_ids[tax_id]["type"], "value": store.tax_ids[tax_id]["value"]}
        for tax_id in store.customer_tax_ids.get(customer["id"], ())
    ]
    apply_balance(invoice, customer["balance"])
    return draft


def apply_balance(invoice: Record, balance: int, minimum_charge: int = 0) -> int:
    """Apply the customer's balance (negative = credit) to ``invoice``; return the balance
    left. A negative total is owed to the customer: nothing is due and the balance keeps it.

    An amount due below ``minimum_charge`` (a finalized invoice's currency's, see
    :func:`stripe_emulator.currencies.minimum_charge`; a draft or preview takes none) is not
    charged: as on Stripe, nothing is due, the invoice is paid at once, and the amount is
    carried to the customer's balance as a debit, added to the next invoice."""
    owed: int = invoice["total"] + balance
    due = max(owed, 0)
    ending = min(owed, 0)
    if 0 < due < minimum_charge:
        due, ending = 0, owed
    invoice.update(
        starting_balance=balance, amount_due=due, amount_remaining=due, ending_balance=ending
    )
    return ending
