"""The lines of a credit note (:mod:`stripe_emulator.credit_notes`): an invoice line item
credited by ``quantity`` (its gross amount times ``quantity / line quantity``, unit amount
shown) or by ``amount`` (quantity 1, no unit amount), with the same share of the line's
discounts; or a custom line, ``unit_amount * quantity``. An invoice line is never credited,
over the invoice's issued credit notes, beyond its amount or its quantity; a line of 0 or less
(a credit proration) cannot be credited.
"""

from __future__ import annotations

from typing import Any

from stripe_emulator import currencies
from stripe_emulator.errors import invalid
from stripe_emulator.ids import new_id
from stripe_emulator.rounding import prorate
from stripe_emulator.state import Record, Store


def money(currency: str, amount: int) -> str:
    return currencies.format_amount(currency, amount)


def issued_of(store: Store, invoice_id: str) -> list[Record]:
    """The invoice's credit notes that are not void, oldest first."""
    notes = (store.credit_notes[note_id] for note_id in store.credit_notes_of.get(invoice_id, ()))
    return [note for note in notes if note["status"] == "issued"]


def metadata(raw: Any) -> dict[str, str]:
    """Metadata given on create (an empty value sets nothing)."""
    if not isinstance(raw, dict):
        return {}
    return {key: value for key, value in raw.items() if isinstance(value, str)}


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
            f"The amount to credit for invoice line item {line_id} "
            f"({money(currency, amount)}) must be positive and at most what is left of it "
            f"({money(currency, left_amount)}).",
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
        "metadata": metadata(spec.get("metadata")),
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
        "metadata": metadata(spec.get("metadata")),
        "pretax_credit_amounts": [],
        "quantity": quantity,
        "tax_rates": [],
        "taxes": [],
        "type": "custom_line_item",
        "unit_amount": unit,
        "unit_amount_decimal": str(unit),
    }


def build(store: Store, invoice: Record, specs: list[dict[str, Any]]) -> list[Record]:
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
