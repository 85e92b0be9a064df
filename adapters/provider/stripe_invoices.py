"""The Stripe adapter's invoices: what a price change would invoice (a preview, which changes
nothing), and a subscription's invoices read for the console and the drift report's money
check."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from adapters.provider.stripe_fields import plan_field
from adapters.provider.stripe_objects import billed_invoice_of, invoice_of, line_of, preview_of
from adapters.provider.stripe_requests import LIST_PAGE_SIZE, StripeRequests
from domain.operations.console import InvoiceView
from domain.provider.rate_budget import CallKind
from domain.subscriptions.change_previews import ChangePreview
from domain.subscriptions.proration import ProrationBehavior
from domain.subscriptions.renewals import BilledInvoice


class StripeInvoices(StripeRequests):
    """The invoice operations of :class:`domain.ports.provider.BillingProvider`."""

    def preview_change(
        self,
        provider_id: str,
        item_id: str,
        price_id: str,
        *,
        proration_behavior: ProrationBehavior,
        proration_date: datetime,
    ) -> ChangePreview:
        params: dict[str, Any] = {
            "subscription": provider_id,
            "subscription_details": {
                "items": [{"id": item_id, "price": price_id}],
                "proration_behavior": proration_behavior,
                "proration_date": int(proration_date.timestamp()),
            },
        }
        invoice = self._call(
            CallKind.READ,
            "preview invoice",
            lambda: self._client.v1.invoices.create_preview(
                params=params,  # type: ignore[arg-type]
            ),
            plan_field,
        )
        return preview_of(invoice)

    def list_invoices(self, provider_subscription_id: str, limit: int) -> list[InvoiceView]:
        return [
            invoice_of(invoice.to_dict(), [line_of(line) for line in invoice.lines.data])
            for invoice in self._latest_invoices(provider_subscription_id, limit)
        ]

    def upcoming_invoice(self, provider_subscription_id: str) -> InvoiceView:
        params: dict[str, Any] = {"subscription": provider_subscription_id}
        invoice = self._call(
            CallKind.READ,
            "preview upcoming invoice",
            lambda: self._client.v1.invoices.create_preview(
                params=params,  # type: ignore[arg-type]
            ),
        )
        return invoice_of(invoice.to_dict(), [line_of(line) for line in invoice.lines.data])

    def list_billed_invoices(
        self, provider_subscription_id: str, limit: int
    ) -> list[BilledInvoice]:
        return [
            billed_invoice_of(invoice)
            for invoice in self._latest_invoices(provider_subscription_id, limit)
        ]

    def _latest_invoices(self, provider_subscription_id: str, limit: int) -> list[Any]:
        """The subscription's latest invoices, newest first: one page, of at most ``limit``."""
        params: dict[str, Any] = {
            "subscription": provider_subscription_id,
            "limit": max(1, min(limit, LIST_PAGE_SIZE)),
        }
        page = self._call(
            CallKind.READ,
            "list invoices",
            lambda: self._client.v1.invoices.list(params=params),  # type: ignore[arg-type]
        )
        return list(page.data)
