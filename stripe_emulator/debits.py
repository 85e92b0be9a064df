"""What each subscription item's current period was debited: flexible billing mode's credits.

In ``billing_mode=flexible`` (the default for new subscriptions since API version 2025-09-30)
Stripe computes a credit proration from the amount originally debited for the time credited,
not from the item's current price (the ``classic`` rule, :func:`invoicing.proration_lines`):
"if the time period being credited was originally billed across multiple debits, Stripe
generates multiple credit prorations: one for each debit", and no debit means no credit.

The emulator keeps, per subscription item, the debits covering its current period
(``Store.billing[sub]["debits"][item]``), each ``{amount, start, end, until, credited, price,
quantity, invoice, line}``: a cycle line (which starts the list again: a renewal, a first
invoice, a restarted cycle) or a debit proration ("Remaining time on ..."). ``until`` is where
the part of the debit not yet credited ends: a credit for the time after ``t`` gives back
``amount * (until - max(t, start)) / (end - start)``, rounded as every proration is
(:func:`invoicing.prorate`) but never more than what is left of the debit (``amount -
credited``), and moves ``until`` back to that point. The credits of one debit therefore add up
to at most the debit, whatever the order and rounding of the changes, and a period cut short
by ``cancel_at`` (billed pro rata) is credited pro rata of what it was billed.

A debit charged less than its amount by discounts (:mod:`stripe_emulator.discounts`) keeps
them (``discounts``: discount id -> amount); its credits give back the same share of each
(``credited_discounts``), so a credit refunds what was charged for the time, whatever
discounts the subscription has since.

Debits and credits are recorded when the lines that carry them are made for good: pending
invoice items at once, an invoice's lines when it is committed (:mod:`stripe_emulator.payments`);
previews and refused changes record nothing, and voiding an invoice (a pending update dropped)
undoes what it recorded.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from stripe_emulator.invoice_objects import LineSpec
from stripe_emulator.rounding import prorate
from stripe_emulator.state import Record, Store


@dataclass(frozen=True, slots=True)
class Credit:
    """What a credit proration gives back of one debit (``index`` in the item's list)."""

    index: int
    amount: int
    period: tuple[int, int]
    debit: Record
    # The share of each of the debit's discounts it gives back: [[discount id, amount]].
    discounts: tuple[tuple[str, int], ...] = ()


def tracked(store: Store, subscription_id: str) -> bool:
    """Whether the subscription's debits are known (not for state files older than them)."""
    return "debits" in store.billing[subscription_id]


def credits(store: Store, subscription_id: str, item_id: str, at: int) -> list[Credit]:
    """One credit per debit of ``item_id`` still covering time after ``at`` (none without a
    debit, or when it was all credited already)."""
    found = []
    debits = store.billing[subscription_id]["debits"].get(item_id, [])
    for index, debit in enumerate(debits):
        since = max(at, debit["start"])
        if since >= debit["until"] or debit["amount"] <= 0:
            continue
        share = prorate(debit["amount"], debit["until"] - since, debit["end"] - debit["start"])
        amount = min(share, debit["amount"] - debit["credited"])
        if amount > 0:
            taken = _discount_shares(debit, since)
            found.append(Credit(index, amount, (since, debit["until"]), debit, taken))
    return found


def _discount_shares(debit: Record, since: int) -> tuple[tuple[str, int], ...]:
    """What a credit after ``since`` gives back of each discount the debit was charged with
    (so that the credit's net is what was charged for that time)."""
    shares = []
    credited = debit.get("credited_discounts", {})
    for discount_id, amount in debit.get("discounts", {}).items():
        share = prorate(amount, debit["until"] - since, debit["end"] - debit["start"])
        share = min(share, amount - credited.get(discount_id, 0))
        if share > 0:
            shares.append((discount_id, share))
    return tuple(shares)


def record(
    store: Store,
    subscription_id: str,
    lines: Iterable[tuple[LineSpec, str | None]],
    invoice_id: str | None,
) -> None:
    """Record what ``lines`` (each with its invoice line id, if invoiced) debit and credit."""
    state = store.billing[subscription_id]
    ledger: dict[str, list[Any]] = state.setdefault("debits", {})
    for spec, line_id in lines:
        item_id = spec.subscription_item
        if spec.proration and spec.consumes is not None:
            debit = ledger[item_id][spec.consumes]
            given = {discount_id: -amount for discount_id, amount in spec.discounts}
            if invoice_id is not None:  # what voiding that invoice gives back (see void)
                debit.setdefault("voidable", []).append(
                    [invoice_id, debit["until"], -spec.amount, given]
                )
            debit["until"] = spec.period[0]
            debit["credited"] -= spec.amount  # a credit's amount is negative
            if given:
                credited = debit.setdefault("credited_discounts", {})
                for discount_id, amount in given.items():
                    credited[discount_id] = credited.get(discount_id, 0) + amount
            continue
        if spec.proration and spec.amount <= 0:
            continue  # a classic-rule credit: it consumes no debit of its own
        debit = {
            "amount": spec.amount,
            "start": spec.period[0],
            "end": spec.period[1],
            "until": spec.period[1],
            "credited": 0,
            "price": spec.price["id"],
            "quantity": spec.quantity,
            "invoice": invoice_id if line_id is not None else None,
            "line": line_id,
        }
        if spec.discounts:  # what the debit was charged is its amount less these
            debit["discounts"] = {discount_id: amount for discount_id, amount in spec.discounts}
        if spec.proration:
            ledger.setdefault(item_id, []).append(debit)
        else:  # a cycle line: the item's period starts again
            ledger[item_id] = [debit]


def void(store: Store, subscription_id: str, invoice_id: str) -> None:
    """``invoice_id`` was voided (a pending update's invoice, an expired first invoice): its
    debits never happened and its credits are undone."""
    ledger: dict[str, list[Any]] = store.billing[subscription_id].get("debits", {})
    for item_id, item_debits in ledger.items():
        kept = [debit for debit in item_debits if debit["invoice"] != invoice_id]
        for debit in kept:
            for voided in [entry for entry in debit.get("voidable", []) if entry[0] == invoice_id]:
                debit["until"] = max(debit["until"], voided[1])
                debit["credited"] -= voided[2]
                credited = debit.get("credited_discounts", {})
                for discount_id, amount in (voided[3] if len(voided) > 3 else {}).items():
                    credited[discount_id] = credited.get(discount_id, 0) - amount
                debit["voidable"].remove(voided)
        ledger[item_id] = kept
