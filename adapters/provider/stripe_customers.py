"""The Stripe adapter's customers: an account's customer created under its key, found again
by the account it names, read, and listed for the drift report."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from functools import partial
from typing import Any

from adapters.provider.stripe_objects import customer_of, customer_of_document
from adapters.provider.stripe_requests import StripeRequests
from domain.billing.accounts import ProviderCustomer
from domain.drift.report import RemoteCustomer, oldest_customer
from domain.provider.pages import ListedPage
from domain.provider.rate_budget import CallKind
from domain.provider.sync import ProviderCustomerState

logger = logging.getLogger(__name__)


class StripeCustomers(StripeRequests):
    """The customer operations of :class:`domain.ports.provider.BillingProvider`."""

    def create_customer(self, customer: ProviderCustomer, *, idempotency_key: str) -> str:
        params: dict[str, Any] = {
            "name": customer.name,
            "email": customer.email,
            "metadata": dict(customer.metadata),
        }
        if customer.phone:
            params["phone"] = customer.phone
        if not customer.address.is_empty:
            params["address"] = {
                key: value for key, value in customer.address.model_dump().items() if value
            }
        if customer.tax_ids:
            params["tax_id_data"] = [
                {"type": entry.type, "value": entry.id} for entry in customer.tax_ids
            ]
        created = self._call(
            CallKind.WRITE,
            "create customer",
            lambda: self._client.v1.customers.create(
                params=params,  # type: ignore[arg-type]
                options={"idempotency_key": idempotency_key},
            ),
            idempotency_key=idempotency_key,
        )
        return str(created.id)

    def find_customer(self, billing_account_id: str) -> str | None:
        """The oldest of every customer naming the account (each search page is read): a
        duplicate is never taken silently. A registration searches only once Stripe may have
        forgotten its idempotency key (a day later), long after the search index caught up."""
        query = f"metadata['billing_account_id']:'{billing_account_id}'"
        found: list[RemoteCustomer] = []
        page: str | None = None
        while True:
            params: dict[str, Any] = {"query": query, "limit": self.page_size}
            if page is not None:
                params["page"] = page
            result = self._call(
                CallKind.READ,
                "search customers",
                partial(self._client.v1.customers.search, params=params),  # type: ignore[arg-type]
            )
            found.extend(customer_of(customer) for customer in result.data)
            page = result.next_page
            if not result.has_more or not page:
                break
        chosen = oldest_customer(found)
        if len(found) > 1 and chosen is not None:
            logger.warning(
                "%d Stripe customers name billing account %s; registration takes the oldest, "
                "%s (`billing-worker stripe drift` lists the others)",
                len(found),
                billing_account_id,
                chosen.id,
                extra={"billing_account_id": billing_account_id, "customer_id": chosen.id},
            )
        return chosen.id if chosen is not None else None

    def get_customer(self, customer_id: str) -> ProviderCustomerState:
        found = self._call(
            CallKind.READ,
            "retrieve customer",
            lambda: self._client.v1.customers.retrieve(customer_id),
        )
        document = found.to_dict()
        metadata = document.get("metadata") or {}
        return ProviderCustomerState(
            id=str(document["id"]),
            deleted=bool(document.get("deleted", False)),
            billing_account_id=metadata.get("billing_account_id"),
        )

    def list_customers(self) -> list[RemoteCustomer]:
        return [customer for page in self.customer_pages() for customer in page.objects]

    def customer_pages(self, after: str | None = None) -> Iterator[ListedPage[RemoteCustomer]]:
        return self._pages("list customers", "/v1/customers", {}, customer_of_document, after)
