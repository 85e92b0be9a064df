"""How every request reaches Stripe: the SDK's client at our pinned API version, one token of
the account's shared rate budget per request, counted in the metrics, its failure translated.

The SDK's own retries are off: retries belong to the command runner, which backs off with
jitter within a budget and keeps the command visible meanwhile. Every request first takes a
token from the account's shared rate budget (``adapters/provider/rate_budget.py``), as a read or
a write, at the priority of the command being run. A 429 that comes all the same (another
system using the account) slows the shared budget down and is tried again through it, up to
:data:`RATE_LIMIT_RETRIES` times, before it counts as a transient failure.

A 409 ``idempotency_key_in_use`` is no failure either: the same request, sent under the same
key by a delivery that died or gave up on its answer, is still running at Stripe, and its
outcome is about to be the answer to this one. It is waited for here, with backoff and
jitter, for at most :data:`IN_PROGRESS_PATIENCE_SECONDS`, then counts as a transient failure
(the command's budget takes over). Counted against the budget at once, a slow first request
used every attempt in a few seconds and the command ended ``failed`` while Stripe carried out
its change (found by the fault schedules, issue 43).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator, Mapping
from functools import partial
from typing import Any, TypeVar
from urllib.parse import urlsplit

import stripe

from adapters.observability import metrics
from adapters.observability.tracing import IDEMPOTENCY_KEY, SpanKind, annotate_span, span
from adapters.provider.stripe_errors import (
    is_in_progress_elsewhere,
    is_rate_limit,
    retry_after,
    translate,
)
from adapters.provider.stripe_fields import field_for_param, list_field
from domain.provider.pages import ListedPage
from domain.provider.rate_budget import CallKind, RateBudget, current_priority

STRIPE_API_VERSION = "2026-10-28.endive"
"""The Stripe API version every request carries (``Stripe-Version``): the one our code and the
SDK's types are written for. An SDK upgrade that moves the SDK's own version fails a test, so
that a new version is adopted on purpose, after reading Stripe's changelog."""
RATE_LIMIT_RETRIES = 3
"""429s answered to one call that are tried again through the budget before the call fails
transiently (and the command's own backoff takes over)."""
IN_PROGRESS_PATIENCE_SECONDS = 30.0
"""How long one call waits for the request Stripe is still running under its key."""
IN_PROGRESS_FIRST_WAIT_SECONDS = 0.25
IN_PROGRESS_LONGEST_WAIT_SECONDS = 2.0
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
        waits_for_the_request_in_progress = 0
        gives_up_waiting_at = time.monotonic() + IN_PROGRESS_PATIENCE_SECONDS
        while True:
            if budget is not None:
                budget.acquire(kind, current_priority())
            try:
                return _measured(operation, send)
            except stripe.StripeError as error:
                if is_in_progress_elsewhere(error) and time.monotonic() < gives_up_waiting_at:
                    ceiling = min(
                        IN_PROGRESS_LONGEST_WAIT_SECONDS,
                        IN_PROGRESS_FIRST_WAIT_SECONDS * 2**waits_for_the_request_in_progress,
                    )
                    waits_for_the_request_in_progress += 1
                    time.sleep(random.uniform(ceiling / 2, ceiling))  # noqa: S311 - jitter
                    continue
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
        path: str,
        params: dict[str, Any],
        read: Callable[[Mapping[str, Any]], T],
        after: str | None = None,
    ) -> Iterator[ListedPage[T]]:
        """A list's pages from the one after ``after``, one READ each (made as the iterator
        is advanced), following ``starting_after``; each object ``read`` from its JSON.

        The page is asked for with the SDK's raw request (the same client: key, API version,
        timeout; the same budget, span, metrics and translated errors as every call) and its
        JSON read straight into our values: a page of 100 subscriptions costs about 10 ms of
        CPU that way, against about 95 ms built into the SDK's objects
        (``tests/benchmarks/bench_list_pages.py``); at Stripe's live rate (100 reads a
        second) a page may cost 10 ms for a pass to be bound by Stripe, not by our work."""
        while True:
            page_params: dict[str, Any] = {**params, "limit": self.page_size}
            if after is not None:
                page_params["starting_after"] = after
            document = self._call(
                CallKind.READ,
                operation,
                partial(self._get_json, path, page_params),
                list_field,
            )
            objects = tuple(read(entry) for entry in document.get("data") or ())
            page = ListedPage(
                objects,
                str(document["data"][-1]["id"]) if objects else None,
                bool(document.get("has_more")) and bool(objects),
            )
            yield page
            if not page.has_more:
                return
            after = page.after

    def _get_json(self, path: str, params: dict[str, Any]) -> Mapping[str, Any]:
        """The JSON Stripe answers to ``GET path`` (a ``stripe.StripeError`` when it refuses),
        without building the SDK's objects."""
        return self._json("get", path, params)

    def _post_json(
        self, path: str, params: dict[str, Any], idempotency_key: str
    ) -> Mapping[str, Any]:
        """The JSON Stripe answers to ``POST path`` under ``idempotency_key``, without building
        the SDK's objects (a subscription read into them costs about as much CPU as the rest
        of a due change's run: ``docs/benchmarks.md``, P5L)."""
        return self._json("post", path, {**params, "idempotency_key": idempotency_key})

    def _json(self, method: str, path: str, params: dict[str, Any]) -> Mapping[str, Any]:
        # raw_request: the SDK's own way to send a request and keep its answer as JSON (the
        # same encoding of the parameters, the same errors; ``idempotency_key`` is taken as the
        # request's option, the header).
        response = self._client.raw_request(method, path, **params)
        document = response.data
        if not isinstance(document, Mapping):
            raise stripe.APIError(f"Stripe answered {path} with no JSON object")
        return document


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
