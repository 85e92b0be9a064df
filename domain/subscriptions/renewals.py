"""What the provider billed for a period, read from its invoices.

Stripe bills a licensed price in advance: a renewal (``billing_reason`` ``subscription_cycle``)
invoices the new period at the price its item had at that instant, in one line that is not a
proration. A correction made later for the same period is prorated as of the period's start,
so its lines start with the period. Both the apply of a change at the period's end (did the
renewal bill the old price?) and the drift report's money check read periods this way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from domain.billing.currencies import format_amount
from domain.subscriptions.change_previews import PreviewLine
from domain.subscriptions.plans import Plan

RENEWAL_REASON = "subscription_cycle"
CORRECTION_SLACK = timedelta(minutes=1)
"""How far after the period's start a proration may start and still correct that period
(Stripe's proration date is in whole seconds)."""
RENEWAL_REMEDY = (
    "credit or charge the difference at Stripe (an invoice item, or a prorated update as of "
    "the period's start), and find out why the renewal billed it: a plan change that reached "
    "Stripe after the renewal, or a price changed at Stripe"
)
"""What an operator does about a period billed at another price than its plan's."""
RENEWAL_INVOICES = 10
"""How many of a subscription's latest invoices are read to find a renewal and what corrected
it (one page: a period rarely has more than a renewal, a correction and a change or two)."""


@dataclass(frozen=True)
class BilledInvoice:
    """An invoice of a subscription as the money checks read it: why it was made, its
    currency and its lines (amounts in minor units, credits negative)."""

    id: str
    status: str
    billing_reason: str | None
    currency: str
    created: datetime
    lines: tuple[PreviewLine, ...]
    credited: int = 0
    """What credit notes issued on it took back, before or after it was paid (a void one takes
    nothing): money given back after the invoice, its lines unchanged."""


@dataclass(frozen=True)
class BilledPeriod:
    """One period as the provider billed it: its renewal's charge and the proration lines
    that correct that period (of any invoice in the renewal's currency)."""

    renewal: BilledInvoice
    charge: PreviewLine
    corrections: tuple[PreviewLine, ...]

    @property
    def start(self) -> datetime:
        return self.charge.period_start

    @property
    def currency(self) -> str:
        return self.renewal.currency

    @property
    def net(self) -> int:
        """What the period costs at its prices, the corrections included (before discounts:
        ``paid`` is after them)."""
        return self.charge.amount + sum(line.amount for line in self.corrections)

    @property
    def discount(self) -> int:
        """What discounts at the provider took off the period, its corrections' included."""
        return self.charge.discount + sum(line.discount for line in self.corrections)

    @property
    def credited(self) -> int:
        """What credit notes on its renewal gave back."""
        return self.renewal.credited

    @property
    def billed(self) -> int:
        """What the period was invoiced: ``net`` less the discounts."""
        return self.net - self.discount

    @property
    def paid(self) -> int:
        """What the period costs the customer: what was invoiced less the credit notes."""
        return self.billed - self.credited

    def bills(self, plan: Plan) -> bool:
        """Whether the period costs ``plan``'s price net: its amount in its currency, at its
        price or corrected to that amount."""
        same_money = self.currency == plan.currency and self.net == plan.amount
        same_price = self.charge.price_id == plan.provider_price_id
        return same_money and (same_price or bool(self.corrections))

    def shown(self) -> str:
        """What the period was billed, for an operator: the renewal's line and the net."""
        corrected = (
            f", {len(self.corrections)} correction line(s) included"
            if self.corrections
            else ", no correction"
        )
        return (
            f"the renewal of {self.start.isoformat()} (invoice {self.renewal.id}) billed "
            f"{format_amount(self.charge.amount, self.currency)} "
            f"({self.charge.price_id or 'no price'}){corrected}: "
            f"{format_amount(self.net, self.currency)} for the period"
        )

    def billed_other_than(self, price_id: str) -> str | None:
        """The price the renewal billed when it is not ``price_id`` and nothing corrected
        the period since; ``None`` when the period needs no correction toward ``price_id``."""
        if self.corrections or self.charge.price_id in (None, price_id):
            return None
        return self.charge.price_id


def latest_renewal(invoices: Sequence[BilledInvoice]) -> BilledPeriod | None:
    """The period of the newest renewal among ``invoices`` (a void one billed nothing)."""
    renewals = [invoice for invoice in invoices if _renews(invoice)]
    if not renewals:
        return None
    renewal = max(renewals, key=lambda invoice: (invoice.created, invoice.id))
    return _period_of(renewal, invoices)


def renewal_of_period(
    invoices: Sequence[BilledInvoice], period_start: datetime
) -> BilledPeriod | None:
    """The period the renewal of ``period_start`` billed, if ``invoices`` hold it."""
    for invoice in sorted(invoices, key=lambda invoice: (invoice.created, invoice.id)):
        if _renews(invoice):
            period = _period_of(invoice, invoices)
            if period is not None and period.start == period_start:
                return period
    return None


def _renews(invoice: BilledInvoice) -> bool:
    return invoice.billing_reason == RENEWAL_REASON and invoice.status != "void"


def _period_of(renewal: BilledInvoice, invoices: Sequence[BilledInvoice]) -> BilledPeriod | None:
    charges = [line for line in renewal.lines if not line.proration]
    if not charges:
        return None
    charge = max(charges, key=lambda line: line.period_start)
    start = charge.period_start
    corrections = tuple(
        line
        for invoice in invoices
        if invoice.status != "void" and invoice.currency == renewal.currency
        for line in invoice.lines
        if line.proration and start <= line.period_start <= start + CORRECTION_SLACK
    )
    return BilledPeriod(renewal, charge, corrections)
