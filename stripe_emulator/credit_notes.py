"""Credit notes: what crediting a finalized invoice does to it and to the customer's balance.

A credit note (``cn_...``) credits an ``open`` or ``paid`` invoice (a ``draft`` or ``void`` one
is refused) by an ``amount``, or by ``lines``: an invoice line item credited by ``quantity``
(its gross amount times ``quantity / line quantity``) or by ``amount``, or a custom line
(``unit_amount * quantity``). A credited invoice line gives back the same share of that
line's discounts (``discount_amount``); the note's ``subtotal`` is the lines' gross sum and
its ``total`` (= ``amount``) that minus the discounts.

As Stripe's API reference says, the note first lowers the invoice's ``amount_remaining`` (and
``amount_due``), never below 0: that part is its ``pre_payment_amount``, added to the
invoice's ``pre_payment_credit_notes_amount``; an open invoice left with nothing to pay is
``paid`` (``invoice.paid``, nothing charged). The rest, all of it on a paid invoice, is its
``post_payment_amount`` (the invoice's ``post_payment_credit_notes_amount``), and
``credit_amount`` (to the customer's ``balance``, a credit the next invoice takes),
``refund_amount`` (a refund of what was paid, recorded in ``refunds``; no refunds API) and
``out_of_band_amount`` must add up to it exactly (Stripe's rule since 2019-12-03: nothing is
allocated by default). ``type`` is ``pre_payment``, ``post_payment`` or ``mixed``. The
issued notes of an invoice never credit more than its ``total``, nor a line more than its
amount or quantity.

Voiding (``POST /v1/credit_notes/{id}/void``) is allowed, as on Stripe, only while its
invoice is ``open``: it gives the invoice back what the note took off its amount due, and the
customer's balance loses any credit it gave. Events: ``credit_note.created``,
``credit_note.updated`` (memo, metadata) and ``credit_note.voided``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from stripe_emulator import credit_note_lines, payments, recorder
from stripe_emulator.credit_note_lines import issued_of, money
from stripe_emulator.errors import invalid
from stripe_emulator.ids import new_id
from stripe_emulator.objects import list_object
from stripe_emulator.state import Record, Store

PDF_PATH = "/_emulator/credit_notes/"


@dataclass(slots=True)
class Allocation:
    """Where a credit note's total goes."""

    pre: int = 0
    post: int = 0
    credit: int = 0
    refund: int = 0
    out_of_band: int | None = None
    lines: list[Record] = field(default_factory=list)


def check_invoice(invoice: Record) -> None:
    if invoice["status"] in ("draft", "void"):
        raise invalid(
            f"You cannot create a credit note for a {invoice['status']} invoice.", "invoice"
        )
    if invoice["status"] not in ("open", "paid"):
        raise invalid(
            f"You can only create a credit note for an open or paid invoice; this one is "
            f"{invoice['status']}.",
            "invoice",
        )


def build(store: Store, invoice: Record, params: dict[str, Any], now: int) -> Record:
    """The credit note ``params`` would issue on ``invoice`` (checked; nothing stored)."""
    check_invoice(invoice)
    currency = invoice["currency"]
    if "lines" not in params and "amount" not in params:
        raise invalid(
            "One of `amount`, `lines`, or `shipping_cost` must be provided.",
            "amount",
            "parameter_missing",
        )
    lines = credit_note_lines.build(store, invoice, params.get("lines", []))
    subtotal = sum(line["amount"] for line in lines)
    discount = sum(line["discount_amount"] for line in lines)
    total = subtotal - discount
    if "amount" in params:
        if lines and params["amount"] != total:
            raise invalid(
                f"The credit note amount ({money(currency, params['amount'])}) must equal the "
                f"sum of its lines ({money(currency, total)}).",
                "amount",
            )
        if not lines:
            subtotal = total = params["amount"]
    if total <= 0:
        raise invalid("The credit note amount must be greater than 0.", "amount")
    left = invoice["total"] - sum(note["total"] for note in issued_of(store, invoice["id"]))
    if total > left:
        raise invalid(
            f"The credit note amount ({money(currency, total)}) is greater than the amount "
            f"that can still be credited on invoice {invoice['id']} ({money(currency, left)}).",
            "amount",
        )
    split = _allocate(store, invoice, params, total)
    note_id = new_id("cn")
    sequence = len(store.credit_notes_of.get(invoice["id"], ())) + 1
    refunds = []
    if split.refund:
        refunds = [
            {
                "amount_refunded": split.refund,
                "payment_record_refund": None,
                "refund": new_id("re"),
                "type": "refund",
            }
        ]
    return {
        "id": note_id,
        "object": "credit_note",
        "amount": total,
        "amount_shipping": 0,
        "created": now,
        "currency": currency,
        "customer": invoice["customer"],
        "customer_account": None,
        "customer_balance_transaction": new_id("cbtxn") if split.credit else None,
        "discount_amount": discount,
        "discount_amounts": _discount_amounts(lines),
        "effective_at": params.get("effective_at", now),
        "invoice": invoice["id"],
        "lines": list_object(f"/v1/credit_notes/{note_id}/lines", lines, False),
        "livemode": False,
        "memo": params.get("memo"),
        "metadata": credit_note_lines.metadata(params.get("metadata")),
        "number": f"{invoice['number']}-CN-{sequence:02d}",
        "out_of_band_amount": split.out_of_band,
        "pdf": f"{store.public_url}{PDF_PATH}{note_id}/pdf",
        "post_payment_amount": split.post,
        "pre_payment_amount": split.pre,
        "pretax_credit_amounts": [],
        "reason": params.get("reason"),
        "refunds": refunds,
        "shipping_cost": None,
        "status": "issued",
        "subtotal": subtotal,
        "subtotal_excluding_tax": subtotal,
        "total": total,
        "total_excluding_tax": total,
        "total_taxes": [],
        "type": _type(split),
        "voided_at": None,
    }


def _discount_amounts(lines: list[Record]) -> list[Record]:
    taken: dict[str, int] = {}
    for line in lines:
        for entry in line["discount_amounts"]:
            taken[entry["discount"]] = taken.get(entry["discount"], 0) + entry["amount"]
    return [{"amount": amount, "discount": discount} for discount, amount in taken.items()]


def _type(split: Allocation) -> str:
    if split.pre and split.post:
        return "mixed"
    return "pre_payment" if split.pre else "post_payment"


def _allocate(store: Store, invoice: Record, params: dict[str, Any], total: int) -> Allocation:
    """Split ``total`` into its pre- and post-payment parts and check where the post-payment
    part goes (``credit_amount + refund_amount + out_of_band_amount`` must equal it)."""
    currency = invoice["currency"]
    remaining = invoice["amount_remaining"] if invoice["status"] == "open" else 0
    split = Allocation(pre=min(total, remaining))
    split.post = total - split.pre
    split.credit = params.get("credit_amount", 0)
    split.refund = params.get("refund_amount", 0)
    split.out_of_band = params.get("out_of_band_amount")
    for name in ("credit_amount", "refund_amount", "out_of_band_amount"):
        if params.get(name, 0) < 0:
            raise invalid(f"Invalid {name}: must be greater than or equal to 0.", name)
    allocated = split.credit + split.refund + (split.out_of_band or 0)
    if allocated != split.post:
        what = "credit note amount" if not split.pre else "credit note's post-payment amount"
        raise invalid(
            f"The sum of credit amount, refund amount and out of band amount "
            f"({money(currency, allocated)}) must equal the {what} "
            f"({money(currency, split.post)}).",
        )
    if split.refund:
        refunded = sum(
            refund["amount_refunded"]
            for note in issued_of(store, invoice["id"])
            for refund in note["refunds"]
        )
        refundable = invoice["amount_paid"] - refunded
        if split.refund > refundable:
            raise invalid(
                f"The refund amount ({money(currency, split.refund)}) is greater than what is "
                f"left to refund of what was paid on invoice {invoice['id']} "
                f"({money(currency, refundable)}).",
                "refund_amount",
            )
    return split


def issue(store: Store, note: Record, now: int) -> None:
    """Store a built credit note and apply it to its invoice and the customer's balance."""
    invoice = store.invoices[note["invoice"]]
    store.add_credit_note(note)
    _shift(store, invoice, note, 1)
    store.events.record("credit_note.created", snapshot(note))
    if invoice["status"] == "open" and invoice["amount_remaining"] == 0:
        recorder.subscription(store, payments.subscription_of(store, invoice))
        payments.mark_paid(store, invoice, now, out_of_band=True)


def void(store: Store, note: Record, now: int) -> None:
    """Void an issued credit note of an open invoice: its effects are undone."""
    invoice = store.invoices[note["invoice"]]
    if note["status"] == "void":
        raise invalid(f"Credit note {note['id']} has already been voided.")
    if invoice["status"] != "open":
        raise invalid("You can only void a credit note if the associated invoice is open.")
    note.update(status="void", voided_at=now)
    _shift(store, invoice, note, -1)
    store.events.record("credit_note.voided", snapshot(note))


def _shift(store: Store, invoice: Record, note: Record, sign: int) -> None:
    """Apply (``sign`` 1) or undo (-1) the note's effects on the invoice and the balance."""
    pre, post = sign * note["pre_payment_amount"], sign * note["post_payment_amount"]
    invoice.update(
        pre_payment_credit_notes_amount=invoice["pre_payment_credit_notes_amount"] + pre,
        post_payment_credit_notes_amount=invoice["post_payment_credit_notes_amount"] + post,
        amount_due=invoice["amount_due"] - pre,
        amount_remaining=invoice["amount_remaining"] - pre,
    )
    credit = post - sign * (note["out_of_band_amount"] or 0) - sign * _refunded(note)
    customer = store.customers.get(note["customer"])
    if credit and customer is not None:
        recorder.customer(store, customer)
        customer["balance"] -= credit


def _refunded(note: Record) -> int:
    return sum(int(refund["amount_refunded"]) for refund in note["refunds"])


def snapshot(note: Record) -> Record:
    return render(dict(note))


def render(note: Record, embedded_lines: int = 10) -> Record:
    """A credit note as Stripe answers it: at most its first 10 lines embedded."""
    lines = note["lines"]
    if len(lines["data"]) <= embedded_lines:
        return note
    rendered = dict(note)
    rendered["lines"] = {**lines, "data": lines["data"][:embedded_lines], "has_more": True}
    return rendered
