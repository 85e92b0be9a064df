"""What a customer is invoiced, read from the Stripe emulator through the real ``stripe`` SDK:
a subscription's invoices with their lines, and the items waiting for the next invoice."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import stripe  # noqa: TID251 - the tests read the emulator's invoices through the SDK


@dataclass(frozen=True)
class Line:
    amount: int
    proration: bool
    price: str | None
    start: datetime
    end: datetime
    discount: int = 0
    """What discounts took off ``amount`` (its ``discount_amounts``)."""


@dataclass(frozen=True)
class Invoice:
    id: str
    billing_reason: str
    status: str
    total: int
    lines: list[Line]
    amount_paid: int
    starting_balance: int
    """The customer's balance it began with (positive: owed), applied to its amount due."""


def invoices_of(sdk: stripe.StripeClient, provider_id: str) -> list[Invoice]:
    """The subscription's invoices, oldest first."""
    listed = sdk.v1.invoices.list(params={"subscription": provider_id, "limit": 100})
    found = []
    for invoice in reversed(listed.data):
        lines = []
        for line in invoice.lines.data:
            details = line.parent.subscription_item_details if line.parent else None
            pricing = line.pricing.price_details if line.pricing else None
            lines.append(
                Line(
                    amount=int(line.amount),
                    proration=bool(details.proration) if details else False,
                    price=str(pricing.price) if pricing else None,
                    start=datetime.fromtimestamp(line.period.start, UTC),
                    end=datetime.fromtimestamp(line.period.end, UTC),
                    discount=sum(int(taken.amount) for taken in line.discount_amounts or ()),
                )
            )
        found.append(
            Invoice(
                str(invoice.id),
                str(invoice.billing_reason),
                str(invoice.status),
                int(invoice.total),
                lines,
                int(invoice.amount_paid),
                int(invoice.starting_balance or 0),
            )
        )
    return found


def pending_items(sdk: stripe.StripeClient, customer_id: str) -> list[Line]:
    """The customer's invoice items waiting for the next invoice (prorations of changes made
    with ``create_prorations``), oldest first."""
    listed = sdk.v1.invoice_items.list(
        params={"customer": customer_id, "pending": True, "limit": 100}
    )
    return [
        Line(
            amount=int(item.amount),
            proration=bool(item.proration),
            price=str(item.pricing.price_details.price)
            if item.pricing and item.pricing.price_details
            else None,
            start=datetime.fromtimestamp(item.period.start, UTC),
            end=datetime.fromtimestamp(item.period.end, UTC),
        )
        for item in reversed(listed.data)
    ]


def pay_open_invoices(sdk: stripe.StripeClient, provider_id: str) -> None:
    """Pay the subscription's open invoices out of band, as a customer paying what it is sent
    would: a ``send_invoice`` subscription whose invoice passes its due date unpaid goes
    ``past_due`` (as on Stripe), and a month whose length exceeds ``days_until_due`` gets
    there before the period ends."""
    listed = sdk.v1.invoices.list(params={"subscription": provider_id, "status": "open"})
    for invoice in listed.data:
        sdk.v1.invoices.pay(str(invoice.id), params={"paid_out_of_band": True})


def net_for_period(sdk: stripe.StripeClient, provider_id: str, start: datetime) -> int:
    """What the period from ``start`` costs, as the emulator billed it: every line of the
    subscription's invoices (void ones aside) that starts with the period, the renewal's
    charge and any proration that corrects it (a correction is prorated as of the period's
    start). Read through the SDK only, independent of the worker's own reading of invoices."""
    return sum(
        line.amount
        for invoice in invoices_of(sdk, provider_id)
        if invoice.status != "void"
        for line in invoice.lines
        if line.start == start
    )
