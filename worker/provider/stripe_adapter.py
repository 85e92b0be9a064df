"""The Stripe adapter: the one module that imports ``stripe``.

It speaks to real Stripe or to the project's emulator (``BILLING_STRIPE_API_BASE``) through the
official SDK, with the SDK's own retries off: retries belong to the command runner, which
backs off with jitter within a budget and keeps the command visible meanwhile. Every write
carries an idempotency key chosen (and persisted) by the caller. What Stripe answers is read
into our values by ``worker/provider/stripe_objects.py``, which needs no SDK.

Errors leave this module as domain errors:

* connection errors, timeouts, 429, 5xx, and anything Stripe marks ``Stripe-Should-Retry:
  true`` (lock timeouts) → :class:`TransientError`, with ``Retry-After`` when given;
* a 5xx marked ``Stripe-Should-Retry: false`` (a failure Stripe stored under our key, which
  a retry would only replay) → :class:`Unavailable`, not retried;
* bad credentials → :class:`Internal` (an operator must fix the configuration);
* any other 4xx → :class:`InvalidArgument`, naming the command's field and carrying
  Stripe's message.

Every request first takes a token from the account's shared rate budget
(``worker/provider/rate_budget.py``), as a read or a write, at the priority of the command being
run. A 429 that comes all the same (another system using the account) slows the shared
budget down and is tried again through it, up to :data:`RATE_LIMIT_RETRIES` times, before it
counts as a transient failure.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from functools import partial
from typing import Any, TypeVar

import stripe

from domain.billing.accounts import ProviderCustomer
from domain.drift.report import (
    BilledInvoice,
    RemoteCustomer,
    RemoteSubscription,
    existing_subscription,
    oldest_customer,
)
from domain.errors import (
    FailedPrecondition,
    Internal,
    InvalidArgument,
    PaymentFailed,
    TransientError,
    Unavailable,
    error_info,
    field_violations,
)
from domain.operations.console import InvoiceView
from domain.provider.rate_budget import CallKind, RateBudget, current_priority
from domain.provider.sync import ProviderCustomerState, RegisteredEndpoint
from domain.subscriptions.change_previews import ChangePreview
from domain.subscriptions.plans import ProviderPlan, ProviderPrice
from domain.subscriptions.proration import PaymentBehavior, ProrationBehavior
from domain.subscriptions.subscription import ProviderSubscription, SubscriptionTerms
from worker.observability import metrics
from worker.provider.stripe_fields import (
    field_for_param,
    plan_field,
    price_field,
    subscription_field,
)
from worker.provider.stripe_objects import (
    billed_invoice_of,
    customer_of,
    invoice_of,
    listed_subscription_of,
    preview_of,
    subscription_of,
)

logger = logging.getLogger(__name__)

PROVIDER_NAME = "stripe"
STRIPE_API_VERSION = "2026-10-28.endive"
"""The Stripe API version every request carries (``Stripe-Version``): the one our code and the
SDK's types are written for. An SDK upgrade that moves the SDK's own version fails a test, so
that a new version is adopted on purpose, after reading Stripe's changelog."""
RATE_LIMIT_RETRIES = 3
"""429s answered to one call that are tried again through the budget before the call fails
transiently (and the command's own backoff takes over)."""
LIST_PAGE_SIZE = 100
"""Objects per page of a list or a search (Stripe's most)."""
T = TypeVar("T")


def _header(error: stripe.StripeError, name: str) -> str | None:
    for key, value in (error.headers or {}).items():
        if key.lower() == name:
            return str(value)
    return None


def _seconds(raw: str | None) -> float | None:
    try:
        return float(raw) if raw is not None else None
    except ValueError:
        return None  # an HTTP date: Stripe never sends one; back off as usual


def is_rate_limit(error: stripe.StripeError) -> bool:
    """A 429 for the request rate (not ``lock_timeout``, which is contention on one object)."""
    stripe_error = error.error
    code = (stripe_error.code if stripe_error else None) or error.code or ""
    return error.http_status == 429 and code != "lock_timeout"


def translate(
    error: stripe.StripeError,
    operation: str,
    field_for: Callable[[str | None], str] = field_for_param,
) -> Exception:
    """The domain error for a Stripe failure of ``operation`` (see the module docstring);
    ``field_for`` names the command field for the Stripe parameter a 4xx blames."""
    status = error.http_status
    request_id = error.request_id or ""
    stripe_error = error.error
    code = (stripe_error.code if stripe_error else None) or error.code or ""
    message = (stripe_error.message if stripe_error else None) or str(error) or "no message"
    should_retry = _header(error, "stripe-should-retry")
    context = {"operation": operation, "request_id": request_id, "stripe_code": code}

    if isinstance(error, stripe.APIConnectionError):
        return TransientError(f"stripe {operation}: connection failed: {message}")
    if should_retry == "true" or status == 429 or (status is not None and status >= 500):
        if should_retry == "false":
            return Unavailable(
                f"stripe {operation} failed and Stripe says a retry will not help: {message}",
                details=[error_info("PROVIDER_UNAVAILABLE", status=str(status), **context)],
            )
        return TransientError(
            f"stripe {operation}: {status} {code or 'error'}: {message}",
            retry_after=_seconds(_header(error, "retry-after")),
        )
    if isinstance(error, (stripe.AuthenticationError, stripe.PermissionError)):
        return Internal(
            "the billing provider refused our credentials",
            details=[error_info("PROVIDER_CREDENTIALS", status=str(status), **context)],
        )
    if isinstance(error, stripe.CardError):
        decline = (stripe_error.decline_code if stripe_error else None) or code
        return PaymentFailed(
            f"the billing provider could not collect the change's invoice: {message}",
            details=[error_info("PAYMENT_FAILED", decline_code=decline or "", **context)],
        )
    if isinstance(error, stripe.IdempotencyError):
        return Internal(
            "the billing provider saw one idempotency key with two different requests",
            details=[error_info("PROVIDER_IDEMPOTENCY", **context)],
        )
    param = stripe_error.param if stripe_error else None
    return InvalidArgument(
        f"the billing provider rejected the request: {message}",
        details=[
            field_violations([(field_for(param), message)]),
            error_info("PROVIDER_REJECTED", status=str(status), param=param or "", **context),
        ],
    )


class StripeBillingProvider:
    """The :class:`domain.ports.provider.BillingProvider` for Stripe."""

    name = PROVIDER_NAME

    def __init__(
        self,
        api_key: str,
        *,
        api_base: str | None = None,
        timeout: float = 30.0,
        budget: RateBudget | None = None,
    ) -> None:
        self._client = stripe.StripeClient(
            api_key,
            base_addresses={"api": api_base} if api_base else {},
            stripe_version=STRIPE_API_VERSION,
            max_network_retries=0,
            http_client=stripe.RequestsClient(timeout=timeout),
        )
        self._budget = budget

    def _call(
        self,
        kind: CallKind,
        operation: str,
        send: Callable[[], T],
        field_for: Callable[[str | None], str] = field_for_param,
    ) -> T:
        """``send`` one request through the rate budget, translating Stripe's errors."""
        budget = self._budget
        rate_limits = 0
        while True:
            if budget is not None:
                budget.acquire(kind, current_priority())
            try:
                return _measured(operation, send)
            except stripe.StripeError as error:
                if (
                    budget is not None
                    and budget.enabled
                    and is_rate_limit(error)
                    and rate_limits < RATE_LIMIT_RETRIES
                ):
                    rate_limits += 1
                    budget.rate_limited(kind, _seconds(_header(error, "retry-after")))
                    continue
                if budget is not None and is_rate_limit(error):
                    budget.rate_limited(kind, _seconds(_header(error, "retry-after")))
                raise translate(error, operation, field_for) from error

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
            params: dict[str, Any] = {"query": query, "limit": LIST_PAGE_SIZE}
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
            "billing_mode": {"type": "flexible"},
        }
        if terms.collection_method == "send_invoice":
            params["days_until_due"] = terms.days_until_due
        if terms.trial_days:
            params["trial_period_days"] = terms.trial_days
        created = self._call(
            CallKind.WRITE,
            "create subscription",
            lambda: self._client.v1.subscriptions.create(
                params=params,  # type: ignore[arg-type]
                options={"idempotency_key": idempotency_key},
            ),
            subscription_field,
        )
        return subscription_of(created)

    def get_subscription(self, provider_id: str) -> ProviderSubscription:
        found = self._call(
            CallKind.READ,
            "retrieve subscription",
            lambda: self._client.v1.subscriptions.retrieve(provider_id),
            plan_field,
        )
        return subscription_of(found)

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
        updated = self._call(
            CallKind.WRITE,
            "update subscription",
            lambda: self._client.v1.subscriptions.update(
                provider_id,
                params=params,  # type: ignore[arg-type]
                options={"idempotency_key": idempotency_key},
            ),
            plan_field,
        )
        return subscription_of(updated)

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

    def register_webhook_endpoint(
        self, url: str, event_types: Sequence[str], known_ids: set[str]
    ) -> RegisteredEndpoint:
        client = self._client
        listed = self._call(
            CallKind.READ,
            "list webhook endpoints",
            lambda: client.v1.webhook_endpoints.list(params={"limit": 100}),
        )
        existing = [str(endpoint.id) for endpoint in listed.data if endpoint.url == url]
        known = [endpoint_id for endpoint_id in existing if endpoint_id in known_ids]
        if known:
            endpoint_id = known[0]
            update: dict[str, Any] = {"enabled_events": list(event_types), "disabled": False}
            self._call(
                CallKind.WRITE,
                "update webhook endpoint",
                lambda: client.v1.webhook_endpoints.update(
                    endpoint_id,
                    params=update,  # type: ignore[arg-type]
                ),
            )
            return RegisteredEndpoint(endpoint_id, None)
        new: dict[str, Any] = {
            "url": url,
            "enabled_events": list(event_types),
            "api_version": STRIPE_API_VERSION,
            "description": "billing-worker",
        }
        created = self._call(
            CallKind.WRITE,
            "create webhook endpoint",
            lambda: client.v1.webhook_endpoints.create(params=new),  # type: ignore[arg-type]
        )
        for old in existing:  # their secrets are unknown here: replaced by the new one
            self._call(
                CallKind.WRITE,
                "delete webhook endpoint",
                lambda old_id=old: client.v1.webhook_endpoints.delete(old_id),  # type: ignore[misc]
            )
        return RegisteredEndpoint(str(created.id), str(created.secret), tuple(existing))

    def list_customers(self) -> list[RemoteCustomer]:
        customers = self._client.v1.customers
        return [
            customer_of(customer)
            for customer in self._pages(
                "list customers", lambda params: customers.list(params=params), {}
            )
        ]

    def list_subscriptions(self, customer_id: str | None = None) -> list[RemoteSubscription]:
        params: dict[str, Any] = {"status": "all"}
        if customer_id is not None:
            params["customer"] = customer_id
        subscriptions = self._client.v1.subscriptions
        return [
            listed_subscription_of(subscription)
            for subscription in self._pages(
                "list subscriptions", lambda page: subscriptions.list(params=page), params
            )
        ]

    def find_subscription(
        self, customer_id: str, subscription_id: str
    ) -> ProviderSubscription | None:
        found = existing_subscription(self.list_subscriptions(customer_id), subscription_id)
        return found.subscription if found is not None else None

    def list_invoices(self, provider_subscription_id: str, limit: int) -> list[InvoiceView]:
        params: dict[str, Any] = {
            "subscription": provider_subscription_id,
            "limit": max(1, min(limit, LIST_PAGE_SIZE)),
        }
        page = self._call(
            CallKind.READ,
            "list invoices",
            lambda: self._client.v1.invoices.list(params=params),  # type: ignore[arg-type]
        )
        return [invoice_of(invoice.to_dict()) for invoice in page.data]

    def list_billed_invoices(
        self, provider_subscription_id: str, limit: int
    ) -> list[BilledInvoice]:
        params: dict[str, Any] = {
            "subscription": provider_subscription_id,
            "limit": max(1, min(limit, LIST_PAGE_SIZE)),
        }
        page = self._call(
            CallKind.READ,
            "list invoices",
            lambda: self._client.v1.invoices.list(params=params),  # type: ignore[arg-type]
        )
        return [billed_invoice_of(invoice) for invoice in page.data]

    def _pages(
        self,
        operation: str,
        fetch: Callable[[Any], stripe.ListObject[Any]],
        params: dict[str, Any],
    ) -> list[Any]:
        """Every object of a list, one READ per page, following ``starting_after``."""
        objects: list[Any] = []
        after: str | None = None
        while True:
            page_params = {**params, "limit": LIST_PAGE_SIZE}
            if after is not None:
                page_params["starting_after"] = after
            page = self._call(
                CallKind.READ,
                operation,
                partial(fetch, page_params),
            )
            objects.extend(page.data)
            if not page.has_more or not page.data:
                return objects
            after = str(page.data[-1].id)


def _measured(operation: str, send: Callable[[], T]) -> T:
    """``send`` one request, counted by operation and HTTP status (``error``: no answer)."""
    label = operation.replace(" ", "_")
    started = time.perf_counter()
    status = "error"
    try:
        answer = send()
        status = "200"
        return answer
    except stripe.StripeError as error:
        status = str(error.http_status) if error.http_status else "error"
        raise
    finally:
        metrics.STRIPE_REQUESTS.labels(label, status).inc()
        metrics.STRIPE_REQUEST_SECONDS.labels(label).observe(time.perf_counter() - started)


def build_provider(
    api_key: str | None,
    api_base: str | None,
    timeout: float,
    budget: RateBudget | None = None,
) -> StripeBillingProvider:
    """The provider for these settings; without a key, online registration is refused."""
    if not api_key:
        raise FailedPrecondition(
            "no billing provider is configured (BILLING_STRIPE_API_KEY is unset): create the "
            "account with offline: true",
            details=[error_info("PROVIDER_NOT_CONFIGURED")],
        )
    return StripeBillingProvider(api_key, api_base=api_base, timeout=timeout, budget=budget)


# --- Stripe's webhooks -------------------------------------------------------------------------

WEBHOOK_TOLERANCE_SECONDS = 300
"""Stripe's own default: a signature older (or newer) than this is refused (replays)."""
_UNIX_TIME = re.compile(r"[0-9]{1,12}")


class BadSignature(Exception):
    """A Stripe webhook request whose signature no secret verifies (or too old or too far
    in the future, or no signature at all). The message says which, without echoing the
    header."""


def verify_stripe_signature(
    payload: bytes,
    signature: str | None,
    secrets: list[str],
    *,
    tolerance: int = WEBHOOK_TOLERANCE_SECONDS,
    now: float | None = None,
) -> None:
    """Whether one of ``secrets`` signed ``payload`` within ``tolerance`` seconds of now,
    either way (several secrets: a rotation without downtime); :class:`BadSignature` if
    not. Verified by the SDK itself over the raw body, before anything is parsed; the SDK
    refuses only a signature too old, so one dated ahead of our clock by more than the
    tolerance (a replay prepared in advance, or a clock gone wrong) is refused here."""
    if not signature:
        raise BadSignature("no Stripe-Signature header")
    if not secrets:
        raise BadSignature("no Stripe webhook secret is configured")
    # Every ``t`` (the SDK reads the last one): a readable Unix time, none in the future.
    stamps = [
        value.strip()
        for name, _, value in (item.partition("=") for item in signature.split(","))
        if name.strip() == "t"
    ]
    if not stamps or not all(_UNIX_TIME.fullmatch(stamp) for stamp in stamps):
        raise BadSignature("the Stripe-Signature has no readable timestamp")
    if max(map(int, stamps)) > (time.time() if now is None else now) + tolerance:
        raise BadSignature("the Stripe-Signature's timestamp is in the future")
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError:
        raise BadSignature("the body is not UTF-8") from None
    for secret in secrets:
        try:
            stripe.WebhookSignature.verify_header(text, signature, secret, tolerance)
        except stripe.SignatureVerificationError:
            continue
        return
    raise BadSignature("no configured secret verifies the Stripe-Signature (or it is too old)")
