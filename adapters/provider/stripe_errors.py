"""What a Stripe failure means to us: the domain error it leaves the adapter as.

* connection errors, timeouts, 429, 5xx, and anything Stripe marks ``Stripe-Should-Retry:
  true`` (lock timeouts) → :class:`TransientError`, with ``Retry-After`` when given;
* a 5xx marked ``Stripe-Should-Retry: false`` (a failure Stripe stored under our key, which
  a retry would only replay) → :class:`Unavailable`, not retried;
* bad credentials → :class:`Internal` (an operator must fix the configuration);
* a declined card → :class:`PaymentFailed`; one key reused for two requests →
  :class:`Internal`;
* ``resource_missing`` on the request's own object (a 404 on ``id``: deleted, or never
  made) → :class:`GoneAtProvider`; a missing object a parameter names (a price, a customer)
  is refused like any other 4xx;
* any other 4xx → :class:`InvalidArgument`, naming the command's field and carrying
  Stripe's message.
"""

from __future__ import annotations

from collections.abc import Callable

import stripe

from adapters.provider.stripe_fields import field_for_param
from domain.errors import (
    GoneAtProvider,
    Internal,
    InvalidArgument,
    PaymentActionRequired,
    PaymentFailed,
    TransientError,
    Unavailable,
    error_info,
    field_violations,
)


def header(error: stripe.StripeError, name: str) -> str | None:
    """The response header ``name`` (lower case) of a failed request, if it came with one."""
    for key, value in (error.headers or {}).items():
        if key.lower() == name:
            return str(value)
    return None


def retry_after(error: stripe.StripeError) -> float | None:
    """The seconds ``Retry-After`` asks for, if given in seconds."""
    raw = header(error, "retry-after")
    try:
        return float(raw) if raw is not None else None
    except ValueError:
        return None  # an HTTP date: Stripe never sends one; back off as usual


def is_rate_limit(error: stripe.StripeError) -> bool:
    """A 429 for the request rate (not ``lock_timeout``, which is contention on one object)."""
    stripe_error = error.error
    code = (stripe_error.code if stripe_error else None) or error.code or ""
    return error.http_status == 429 and code != "lock_timeout"


def is_in_progress_elsewhere(error: stripe.StripeError) -> bool:
    """A 409 ``idempotency_key_in_use``: a request under the same key is still running at
    Stripe (see ``stripe_requests``: it is waited for, not failed)."""
    stripe_error = error.error
    code = (stripe_error.code if stripe_error else None) or error.code or ""
    return error.http_status == 409 and code == "idempotency_key_in_use"


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
    should_retry = header(error, "stripe-should-retry")
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
            retry_after=retry_after(error),
        )
    if isinstance(error, (stripe.AuthenticationError, stripe.PermissionError)):
        return Internal(
            "the billing provider refused our credentials",
            details=[error_info("PROVIDER_CREDENTIALS", status=str(status), **context)],
        )
    if isinstance(error, stripe.CardError):
        decline = (stripe_error.decline_code if stripe_error else None) or code
        if code == AUTHENTICATION_REQUIRED:
            return PaymentActionRequired(
                f"the customer must authenticate the payment of the change's invoice: {message}",
                details=[error_info("PAYMENT_ACTION_REQUIRED", **context)],
            )
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
    refused = GoneAtProvider if is_gone(error) else InvalidArgument
    return refused(
        f"the billing provider rejected the request: {message}",
        details=[
            field_violations([(field_for(param), message)]),
            error_info("PROVIDER_REJECTED", status=str(status), param=param or "", **context),
        ],
    )


AUTHENTICATION_REQUIRED = "subscription_payment_intent_requires_action"
"""Stripe's code for an update sent with ``error_if_incomplete`` whose payment needs the
customer's authentication (3-D Secure)."""


def is_gone(error: stripe.StripeError) -> bool:
    """Whether Stripe answered that the object the request addresses does not exist: a 404
    ``resource_missing`` on its ``id`` (Stripe names the parameter holding a missing object
    it was given, ``customer`` or ``items[0][price]``, when that is what is missing)."""
    stripe_error = error.error
    code = (stripe_error.code if stripe_error else None) or error.code or ""
    param = (stripe_error.param if stripe_error else None) or ""
    return error.http_status == 404 and code == "resource_missing" and param in ("", "id")
