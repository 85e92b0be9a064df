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

from stripe_emulator import currencies, payments, recorder
from stripe_emulator.errors import invalid
from stripe_emulator.ids import new_id
from stripe_emulator.objects import list_object
from stripe_emulator.rounding import prorate
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


def _metadata(raw: Any) -> dict[str, str]:
    """Metadata given on create (an empty value sets nothing)."""
    if not isinstance(raw, dict):
        return {}
    return {key: value for key, value in raw.items() if isinstance(value, str)}


def _money(currency: str, amount: int) -> str:
    return currencies.format_amount(currency, amount)


def issued_of(store: Store, invoice_id: str) -> list[Record]:
    """The invoice's credit notes that are not void, oldest first."""
    notes = (store.credit_notes[note_id] for note_id in store.credit_notes_of.get(invoice_id, ()))
    return [note for note in notes if note["status"] == "issued"]


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


def _credited(store: Store, invoice_id: str) -> dict[str, list[int]]:
    """Per invoice line: [gross amount, quantity] credited by its issued notes."""
    credited: dict[str, list[int]] = {}
    for note in issued_of(store, invoice_id):
        for line in note["lines"]["data"]:
            if line["type"] == "invoice_line_item":
                entry = credited.setdefault(line["invoice_line_item"], [0, 0])
                entry[0] += line["amount"]
                entry[1] += line["quantity"] if line["unit_amount"] is not None else 0
    return credited


def _invoice_line(
    invoice: Record, spec: dict[str, Any], param: str, credited: dict[str, list[int]]
) -> Record:
    line_id = spec.get("invoice_line_item")
    if line_id is None:
        raise invalid(
            f"Missing required param: {param}[invoice_line_item].",
            f"{param}[invoice_line_item]",
            "parameter_missing",
        )
    lines = {line["id"]: line for line in invoice["lines"]["data"]}
    line = lines.get(line_id)
    if line is None:
        raise invalid(
            f"Invoice line item {line_id} is not a line of invoice {invoice['id']}.",
            f"{param}[invoice_line_item]",
        )
    for name in ("unit_amount", "description"):
        if name in spec:
            raise invalid(
                f"{param}[{name}] is only valid when `type` is `custom_line_item`.",
                f"{param}[{name}]",
            )
    if ("quantity" in spec) == ("amount" in spec):
        raise invalid(
            "`quantity` or `amount` is required when crediting an invoice line item, not both.",
            param,
        )
    gross_line = line["amount"]
    if gross_line <= 0:
        raise invalid(f"Invoice line item {line_id} has nothing to credit.", param)
    done_amount, done_quantity = credited.get(line_id, [0, 0])
    quantity: int = 1
    unit: int | None = None
    if "quantity" in spec:
        quantity = spec["quantity"]
        left = line["quantity"] - done_quantity
        if not 0 < quantity <= left:
            raise invalid(
                f"Invalid quantity {quantity} for invoice line item {line_id}: at most {left} "
                "can still be credited.",
                f"{param}[quantity]",
            )
        amount = prorate(gross_line, quantity, line["quantity"])
        unit = prorate(gross_line, 1, line["quantity"])
    else:
        amount = spec["amount"]
    left_amount = gross_line - done_amount
    if not 0 < amount <= left_amount:
        currency = invoice["currency"]
        raise invalid(
            f"The amount to credit for invoice line item {line_id} ({_money(currency, amount)}) "
            f"must be positive and at most what is left of it ({_money(currency, left_amount)}).",
            param,
        )
    discounts = [
        {"amount": prorate(entry["amount"], amount, gross_line), "discount": entry["discount"]}
        for entry in line["discount_amounts"]
    ]
    return {
        "id": new_id("cnli"),
        "object": "credit_note_line_item",
        "amount": amount,
        "description": line["description"],
        "discount_amount": sum(entry["amount"] for entry in discounts),
        "discount_amounts": discounts,
        "invoice_line_item": line_id,
        "livemode": False,
        "metadata": _metadata(spec.get("metadata")),
        "pretax_credit_amounts": [],
        "quantity": quantity,
        "tax_rates": [],
        "taxes": [],
        "type": "invoice_line_item",
        "unit_amount": unit,
        "unit_amount_decimal": None if unit is None else str(unit),
    }


def _custom_line(spec: dict[str, Any], param: str) -> Record:
    for name in ("invoice_line_item", "amount"):
        if name in spec:
            raise invalid(
                f"{param}[{name}] is only valid when `type` is `invoice_line_item`.",
                f"{param}[{name}]",
            )
    if "unit_amount" not in spec:
        raise invalid(
            f"Missing required param: {param}[unit_amount].",
            f"{param}[unit_amount]",
            "parameter_missing",
        )
    quantity = spec.get("quantity", 1)
    unit = spec["unit_amount"]
    if unit <= 0 or quantity <= 0:
        raise invalid("A custom line item must credit a positive amount.", param)
    return {
        "id": new_id("cnli"),
        "object": "credit_note_line_item",
        "amount": unit * quantity,
        "description": spec.get("description"),
        "discount_amount": 0,
        "discount_amounts": [],
        "livemode": False,
        "metadata": _metadata(spec.get("metadata")),
        "pretax_credit_amounts": [],
        "quantity": quantity,
        "tax_rates": [],
        "taxes": [],
        "type": "custom_line_item",
        "unit_amount": unit,
        "unit_amount_decimal": str(unit),
    }


def _lines(store: Store, invoice: Record, specs: list[dict[str, Any]]) -> list[Record]:
    credited = _credited(store, invoice["id"])
    lines = []
    for index, spec in enumerate(specs):
        param = f"lines[{index}]"
        if spec["type"] == "invoice_line_item":
            line = _invoice_line(invoice, spec, param, credited)
            entry = credited.setdefault(line["invoice_line_item"], [0, 0])
            entry[0] += line["amount"]
            entry[1] += line["quantity"] if line["unit_amount"] is not None else 0
        else:
            line = _custom_line(spec, param)
        lines.append(line)
    return lines


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
    lines = _lines(store, invoice, params.get("lines", []))
    subtotal = sum(line["amount"] for line in lines)
    discount = sum(line["discount_amount"] for line in lines)
    total = subtotal - discount
    if "amount" in params:
        if lines and params["amount"] != total:
            raise invalid(
                f"The credit note amount ({_money(currency, params['amount'])}) must equal the "
                f"sum of its lines ({_money(currency, total)}).",
                "amount",
            )
        if not lines:
            subtotal = total = params["amount"]
    if total <= 0:
        raise invalid("The credit note amount must be greater than 0.", "amount")
    left = invoice["total"] - sum(note["total"] for note in issued_of(store, invoice["id"]))
    if total > left:
        raise invalid(
            f"The credit note amount ({_money(currency, total)}) is greater than the amount "
            f"that can still be credited on invoice {invoice['id']} ({_money(currency, left)}).",
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
        "metadata": _metadata(params.get("metadata")),
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
            f"({_money(currency, allocated)}) must equal the {what} "
            f"({_money(currency, split.post)}).",
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
                f"The refund amount ({_money(currency, split.refund)}) is greater than what is "
                f"left to refund of what was paid on invoice {invoice['id']} "
                f"({_money(currency, refundable)}).",
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
