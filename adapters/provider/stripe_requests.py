"""How every request reaches Stripe: the SDK's client at our pinned API version, one token of
the account's shared rate budget per request, counted in the metrics, its failure translated.

The SDK's own retries are off: retries belong to the command runner, which backs off with
jitter within a budget and keeps the command visible meanwhile. Every request first takes a
token from the account's shared rate budget (``adapters/provider/rate_budget.py``), as a read or
a write, at the priority of the command being run. A 429 that comes all the same (another
system using the account) slows the shared budget down and is tried again through it, up to
:data:`RATE_LIMIT_RETRIES` times, before it counts as a transient failure.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar
from urllib.parse import urlsplit

import stripe

from adapters.observability import metrics
from adapters.observability.tracing import IDEMPOTENCY_KEY, SpanKind, annotate_span, span
from adapters.provider.stripe_errors import is_rate_limit, retry_after, translate
from adapters.provider.stripe_fields import field_for_param
from domain.provider.rate_budget import CallKind, RateBudget, current_priority

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


class StripeRequests:
    """The client and the way every request is sent, which each family of the adapter's
    operations (``stripe_customers``, ``stripe_subscriptions``, …) builds on."""

    page_size = LIST_PAGE_SIZE
    """Objects per page this adapter asks for (fewer in the tests that read every page)."""

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
        self._server_address = urlsplit(api_base or stripe.DEFAULT_API_BASE).hostname or "?"

    def _call(
        self,
        kind: CallKind,
        operation: str,
        send: Callable[[], T],
        field_for: Callable[[str | None], str] = field_for_param,
        *,
        idempotency_key: str | None = None,
    ) -> T:
        """``send`` one request through the rate budget, translating Stripe's errors; in a
        span of its own that names the operation and its ``idempotency_key`` (never the API
        key, nor what the request carries: personal data)."""
        attributes = {
            "stripe.operation": operation,
            "stripe.call_kind": kind.value,
            "server.address": self._server_address,
        }
        if idempotency_key is not None:
            attributes[IDEMPOTENCY_KEY] = idempotency_key
        with span(f"stripe {operation}", attributes, kind=SpanKind.CLIENT):
            return self._call_in_budget(kind, operation, send, field_for)

    def _call_in_budget(
        self,
        kind: CallKind,
        operation: str,
        send: Callable[[], T],
        field_for: Callable[[str | None], str],
    ) -> T:
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
                    budget.rate_limited(kind, retry_after(error))
                    continue
                if budget is not None and is_rate_limit(error):
                    budget.rate_limited(kind, retry_after(error))
                raise translate(error, operation, field_for) from error

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
            page_params = {**params, "limit": self.page_size}
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
        annotate_span("http.response.status_code", int(status) if status.isdigit() else None)
        metrics.STRIPE_REQUESTS.labels(label, status).inc()
        metrics.STRIPE_REQUEST_SECONDS.labels(label).observe(time.perf_counter() - started)
