"""Builders for invoices, their line items and invoice items, with Stripe's key sets.

As in :mod:`stripe_emulator.objects`, every key of ``fixtures3.json``'s ``invoice``,
``line_item`` and ``invoiceitem`` is present (``id`` and ``object`` first, then alphabetical),
with Stripe's defaults for what the emulator does not model (taxes, credit notes, payment
settings, shipping). Discounts are computed by :mod:`stripe_emulator.discounts` and carried
by each :class:`LineSpec`. In API version 2026-10-28.endive an invoice's link to its
subscription is ``parent.subscription_details.subscription`` and a line's to its item is
``parent.subscription_item_details``; the top-level ``subscription`` keys the fixtures still
list stay ``null``. A line's price is ``pricing.price_details.price``.

Lines are built from a :class:`LineSpec` (what a line bills) so that an invoice, a preview
and an invoice item share one shape.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from stripe_emulator.objects import list_object
from stripe_emulator.state import Record


@dataclass(slots=True)
class LineSpec:
    """One thing an invoice bills: a subscription item's period, or a proration of it.

    ``invoice_item`` is the id of the invoice item behind a proration line (``None`` for the
    subscription's own lines); ``credited`` is ``(invoice, [line ids])``, the debit lines a
    credit proration gives back; ``consumes`` the debit a flexible-mode credit gives back.
    """

    amount: int
    currency: str
    description: str
    period: tuple[int, int]
    price: Record
    quantity: int
    subscription: str
    subscription_item: str
    proration: bool = False
    invoice_item: str | None = None
    credited: tuple[str, list[str]] | None = None
    # A flexible-mode credit: the index of the debit it gives back (see debits.py).
    consumes: int | None = None
    # What each discount takes off ``amount`` ([discount id, amount]; negative on a credit)
    # and whether the line shows it included in its amount (a proration in ``included`` mode).
    discounts: list[list[Any]] = field(default_factory=list)
    included: bool = False

    @property
    def shown(self) -> int:
        """The line's ``amount``: gross, or net of its discounts when they are included."""
        return self.amount - self.discounted if self.included else self.amount

    @property
    def discounted(self) -> int:
        return sum(amount for _, amount in self.discounts)

    @property
    def net(self) -> int:
        """What the line bills after its discounts."""
        return self.amount - self.discounted

    @property
    def discountable(self) -> bool:
        """Stripe: a subscription line is; a proration only when its discounts are itemized."""
        return not (self.proration and not self.itemized)

    @property
    def itemized(self) -> bool:
        return not self.included

    def discount_amounts(self) -> list[Record]:
        return [
            {"amount": 0 if self.included else amount, "discount": discount_id}
            for discount_id, amount in self.discounts
        ]


def _pricing(price: Record) -> Record:
    return {
        "price_details": {"price": price["id"], "product": price["product"]},
        "type": "price_details",
        "unit_amount_decimal": price["unit_amount_decimal"],
    }


def _proration_details(spec: LineSpec) -> Record | None:
    if not spec.proration:
        return None
    credited = spec.credited
    if credited is None:
        return {"credited_items": None}
    return {"credited_items": {"invoice": credited[0], "invoice_line_items": list(credited[1])}}


def line_item(line_id: str, invoice_id: str | None, spec: LineSpec) -> Record:
    return {
        "id": line_id,
        "object": "line_item",
        "amount": spec.shown,
        "currency": spec.currency,
        "description": spec.description,
        "discount_amounts": spec.discount_amounts(),
        "discountable": spec.discountable,
        "discounts": [discount_id for discount_id, _ in spec.discounts],
        "invoice": invoice_id,
        "livemode": False,
        "metadata": {},
        "parent": {
            "invoice_item_details": None,
            "subscription_item_details": {
                "invoice_item": spec.invoice_item,
                "proration": spec.proration,
                "proration_details": _proration_details(spec),
                "subscription": spec.subscription,
                "subscription_item": spec.subscription_item,
            },
            "type": "subscription_item_details",
        },
        "period": {"end": spec.period[1], "start": spec.period[0]},
        "pretax_credit_amounts": [],
        "pricing": _pricing(spec.price),
        "quantity": spec.quantity,
        "quantity_decimal": str(spec.quantity),
        "subscription": None,
        "subtotal": spec.shown,
        "taxes": [],
    }


def invoice_item(item_id: str, customer_id: str, date: int, spec: LineSpec) -> Record:
    """A proration waiting for an invoice (``invoice`` is set once an invoice takes it)."""
    return {
        "id": item_id,
        "object": "invoiceitem",
        "amount": spec.shown,
        "currency": spec.currency,
        "customer": customer_id,
        "customer_account": None,
        "date": date,
        "description": spec.description,
        "discountable": spec.discountable,
        "discounts": [discount_id for discount_id, _ in spec.discounts],
        "invoice": None,
        "livemode": False,
        "metadata": {},
        "net_amount": spec.net,
        "parent": {
            "subscription_details": {
                "subscription": spec.subscription,
                "subscription_item": spec.subscription_item,
            },
            "type": "subscription_details",
        },
        "period": {"end": spec.period[1], "start": spec.period[0]},
        "pricing": _pricing(spec.price),
        "proration": spec.proration,
        "quantity": spec.quantity,
        "quantity_decimal": str(spec.quantity),
        "tax_rates": [],
        "test_clock": None,
    }


def invoice(
    invoice_id: str,
    created: int,
    customer: Record,
    subscription: Record,
    fields: dict[str, Any],
    lines: list[Record],
) -> Record:
    """A draft invoice of ``subscription``; ``fields`` holds ``billing_reason``, ``period``
    (start, end) and optionally ``proration_date`` (previews)."""
    subtotal = sum(line["amount"] for line in lines)
    taken: dict[str, int] = {}
    for line in lines:
        for entry in line["discount_amounts"]:
            taken[entry["discount"]] = taken.get(entry["discount"], 0) + entry["amount"]
    total = subtotal - sum(taken.values())
    period_start, period_end = fields["period"]
    return {
        "id": invoice_id,
        "object": "invoice",
        "account_country": "US",
        "account_name": None,
        "account_tax_ids": None,
        "amount_due": total,
        "amount_overpaid": 0,
        "amount_paid": 0,
        "amount_remaining": total,
        "amount_shipping": 0,
        "application": None,
        "attempt_count": 0,
        "attempted": False,
        "auto_advance": True,
        "automatic_tax": {
            "disabled_reason": None,
            "enabled": False,
            "liability": None,
            "provider": None,
            "status": None,
        },
        "automatically_finalizes_at": None,
        "billing_reason": fields["billing_reason"],
        "collection_method": subscription["collection_method"],
        "created": created,
        "currency": subscription["currency"],
        "custom_fields": None,
        "customer": customer["id"],
        "customer_account": None,
        "customer_address": customer["address"],
        "customer_email": customer["email"],
        "customer_name": customer["name"],
        "customer_phone": customer["phone"],
        "customer_shipping": customer["shipping"],
        "customer_tax_exempt": customer["tax_exempt"],
        "customer_tax_ids": [],
        "default_payment_method": None,
        "default_source": None,
        "default_tax_rates": [],
        "description": None,
        "discounts": list(taken),
        "due_date": None,
        "effective_at": None,
        "ending_balance": None,
        "footer": None,
        "from_invoice": None,
        "hosted_invoice_url": None,
        "invoice_pdf": None,
        "issuer": {"type": "self"},
        "last_finalization_error": None,
        "latest_revision": None,
        "lines": list_object(f"/v1/invoices/{invoice_id}/lines", lines, False),
        "livemode": False,
        "metadata": {},
        "next_payment_attempt": None,
        "number": None,
        "on_behalf_of": None,
        "parent": {
            "quote_details": None,
            "subscription_details": {
                "metadata": dict(subscription["metadata"]),
                "subscription": subscription["id"],
                "subscription_proration_date": fields.get("proration_date"),
            },
            "type": "subscription_details",
        },
        "payment_settings": {
            "default_mandate": None,
            "payment_method_options": None,
            "payment_method_types": None,
        },
        "period_end": period_end,
        "period_start": period_start,
        "post_payment_credit_notes_amount": 0,
        "pre_payment_credit_notes_amount": 0,
        "receipt_number": None,
        "rendering": None,
        "shipping_cost": None,
        "shipping_details": None,
        "starting_balance": 0,
        "statement_descriptor": None,
        "status": "draft",
        "status_transitions": {
            "finalized_at": None,
            "marked_uncollectible_at": None,
            "paid_at": None,
            "voided_at": None,
        },
        "subscription": None,
        "subtotal": subtotal,
        "subtotal_excluding_tax": subtotal,
        "test_clock": None,
        "total": total,
        "total_discount_amounts": [
            {"amount": amount, "discount": discount_id} for discount_id, amount in taken.items()
        ],
        "total_excluding_tax": total,
        "total_pretax_credit_amounts": [],
        "total_taxes": [],
        "webhooks_delivered_at": None,
    }


def pending_update(
    fields: dict[str, Any], subscription_items: list[Record], expires_at: int
) -> Record:
    """A subscription's ``pending_update``: what applies once its invoice is paid."""
    return {
        "billing_cycle_anchor": fields.get("billing_cycle_anchor"),
        "discount": None,
        "discounts": None,
        "expires_at": expires_at,
        "metadata": fields.get("metadata"),
        "subscription_items": subscription_items,
        "trial_end": fields.get("trial_end"),
        "trial_from_plan": None,
    }
