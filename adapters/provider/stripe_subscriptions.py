"""The Stripe adapter's plans and subscriptions: a plan's product and price, a subscription
created, read, its price changed (now or staged for its period's end), found again and listed
for the drift report."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from functools import partial
from typing import Any
from urllib.parse import quote

from adapters.provider.stripe_fields import plan_field, price_field, subscription_field
from adapters.provider.stripe_objects import (
    listed_subscription_of_document,
    subscription_of_document,
)
from adapters.provider.stripe_requests import StripeRequests
from domain.drift.report import RemoteSubscription, existing_subscription
from domain.provider.pages import ListedPage
from domain.provider.rate_budget import CallKind
from domain.subscriptions.plans import ProviderPlan, ProviderPrice
from domain.subscriptions.proration import PaymentBehavior, ProrationBehavior
from domain.subscriptions.subscription import ProviderSubscription, SubscriptionTerms

DISCOUNTS = "discounts.source.coupon"
"""Every subscription read (retrieved or listed) comes with its discounts and their coupons'
terms (a subscription without one costs nothing more), so the drift report and the discounted
gauge know what a coupon redeemed at Stripe takes (``domain/billing/discounts.py``). Writes
answer the discounts' ids only."""
LISTED_DISCOUNTS = f"data.{DISCOUNTS}"


class StripeSubscriptions(StripeRequests):
    """The plan and subscription operations of
    :class:`domain.ports.provider.BillingProvider`."""

    def create_plan_price(self, plan: ProviderPlan, *, idempotency_key: str) -> ProviderPrice:
        metadata = {"plan_id": plan.plan_id, "plan_name": plan.name}
        params: dict[str, Any] = {
            "currency": plan.currency,
            "unit_amount": plan.amount,
            "recurring": {"interval": plan.interval},
            "nickname": plan.title,
            "product_data": {"name": plan.title, "metadata": metadata},
            "metadata": metadata,
        }
        price = self._call(
            CallKind.WRITE,
            "create price",
            lambda: self._client.v1.prices.create(
                params=params,  # type: ignore[arg-type]
                options={"idempotency_key": idempotency_key},
            ),
            price_field,
            idempotency_key=idempotency_key,
        )
        product = price.product
        product_id = product if isinstance(product, str) else product.id
        return ProviderPrice(product_id=str(product_id), price_id=str(price.id))

    def create_subscription(
        self,
        customer_id: str,
        price_id: str,
        terms: SubscriptionTerms,
        *,
        metadata: dict[str, str],
        idempotency_key: str,
    ) -> ProviderSubscription:
        params: dict[str, Any] = {
            "customer": customer_id,
            "items": [{"price": price_id}],
            "metadata": metadata,
            "collection_method": terms.collection_method,
            # Pinned rather than left to the API version or the account's default: flexible
            # mode credits a change from what the customer was actually debited.
            # ``itemized``: a proration's amount is its gross, its discount beside it, as a
            # renewal's line is (``included`` would net it), so the money checks read every
            # line alike.
            "billing_mode": {"type": "flexible", "flexible": {"proration_discounts": "itemized"}},
        }
        if terms.collection_method == "send_invoice":
            params["days_until_due"] = terms.days_until_due
        if terms.trial_days:
            params["trial_period_days"] = terms.trial_days
        created = self._call(
            CallKind.WRITE,
            "create subscription",
            partial(self._post_json, "/v1/subscriptions", params, idempotency_key),
            subscription_field,
            idempotency_key=idempotency_key,
        )
        return subscription_of_document(created)

    def get_subscription(self, provider_id: str) -> ProviderSubscription:
        found = self._call(
            CallKind.READ,
            "retrieve subscription",
            partial(self._get_json, _subscription_path(provider_id), {"expand": [DISCOUNTS]}),
            plan_field,
        )
        return subscription_of_document(found)

    def change_subscription_price(
        self,
        provider_id: str,
        item_id: str,
        price_id: str,
        *,
        proration_behavior: ProrationBehavior,
        idempotency_key: str,
        proration_date: datetime | None = None,
        payment_behavior: PaymentBehavior | None = None,
    ) -> ProviderSubscription:
        params: dict[str, Any] = {
            "items": [{"id": item_id, "price": price_id}],
            "proration_behavior": proration_behavior,
        }
        if proration_date is not None:
            params["proration_date"] = int(proration_date.timestamp())
        if payment_behavior is not None:
            params["payment_behavior"] = payment_behavior
        # Writes expand no more than before discounts were read: Stripe compares a retry's
        # parameters with the first attempt's, and a write retried across an upgrade must
        # still be the same request. Its discounts are read by the sync (terms included).
        if payment_behavior == "pending_if_incomplete":
            params["expand"] = ["latest_invoice"]  # where the customer pays, if held
        updated = self._call(
            CallKind.WRITE,
            "update subscription",
            partial(self._post_json, _subscription_path(provider_id), params, idempotency_key),
            plan_field,
            idempotency_key=idempotency_key,
        )
        return subscription_of_document(updated)

    def list_subscriptions(self, customer_id: str | None = None) -> list[RemoteSubscription]:
        params: dict[str, Any] = {"status": "all", "expand": [LISTED_DISCOUNTS]}
        if customer_id is not None:
            params["customer"] = customer_id
        return [
            subscription
            for page in self._subscription_pages(params, None)
            for subscription in page.objects
        ]

    def subscription_pages(
        self, after: str | None = None
    ) -> Iterator[ListedPage[RemoteSubscription]]:
        return self._subscription_pages({"status": "all", "expand": [LISTED_DISCOUNTS]}, after)

    def _subscription_pages(
        self, params: dict[str, Any], after: str | None
    ) -> Iterator[ListedPage[RemoteSubscription]]:
        return self._pages(
            "list subscriptions",
            "/v1/subscriptions",
            params,
            listed_subscription_of_document,
            after,
        )

    def find_subscription(
        self, customer_id: str, subscription_id: str
    ) -> ProviderSubscription | None:
        found = existing_subscription(self.list_subscriptions(customer_id), subscription_id)
        return found.subscription if found is not None else None


def _subscription_path(provider_id: str) -> str:
    return f"/v1/subscriptions/{quote(provider_id, safe='')}"
