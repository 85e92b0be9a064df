"""Stripe's error envelope and the errors the emulator raises.

Stripe answers every failure with ``{"error": {...}}``. The emulator always sends the keys
``type``, ``code``, ``message``, ``param`` and ``doc_url`` (``null`` where Stripe would leave
them out, so clients can rely on their presence) plus ``request_log_url`` like Stripe, and
``decline_code`` for card errors. The HTTP status, not ``type``, is what the SDK maps to its
exception classes (401 -> AuthenticationError, 402 -> CardError, 429 -> RateLimitError, 400/404
-> InvalidRequestError or IdempotencyError when ``type`` is ``idempotency_error``, else
APIError).

Notable Stripe facts reproduced here:

* A wrong or missing API key is a 401 whose ``type`` is ``invalid_request_error`` (Stripe has no
  ``authentication_error`` type on the wire; the SDK raises AuthenticationError from the status).
* Rate limiting is a 429 with code ``rate_limit``; an object lock timeout is a 429 with code
  ``lock_timeout`` and ``Stripe-Should-Retry: true`` (the only 429 the SDK retries).
* A concurrent request holding the same idempotency key is a 409 ``idempotency_key_in_use``.
"""

from __future__ import annotations

from typing import Any, Final

DOC_URL_BASE: Final = "https://stripe.com/docs/error-codes/"

INVALID_REQUEST: Final = "invalid_request_error"
API_ERROR: Final = "api_error"
CARD_ERROR: Final = "card_error"
IDEMPOTENCY_ERROR: Final = "idempotency_error"


class StripeError(Exception):
    """An error answered to the client in Stripe's envelope.

    ``headers`` are extra response headers (for example ``Stripe-Should-Retry``).
    """

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type_: str = INVALID_REQUEST,
        code: str | None = None,
        param: str | None = None,
        decline_code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type_
        self.code = code
        self.param = param
        self.decline_code = decline_code
        self.headers = headers or {}

    def body(self, request_id: str, now: int) -> dict[str, Any]:
        """The JSON body Stripe would send for this error."""
        error: dict[str, Any] = {
            "code": self.code,
            "doc_url": DOC_URL_BASE + self.code.replace("_", "-") if self.code else None,
            "message": self.message,
            "param": self.param,
            "request_log_url": f"https://dashboard.stripe.com/test/logs/{request_id}?t={now}",
            "type": self.type,
        }
        if self.decline_code is not None:
            error["decline_code"] = self.decline_code
        return {"error": error}


def invalid(message: str, param: str | None = None, code: str | None = None) -> StripeError:
    """A 400 ``invalid_request_error``."""
    return StripeError(400, message, code=code, param=param)


def resource_missing(kind: str, object_id: str, param: str = "id") -> StripeError:
    """Stripe's 404 for an id that does not exist (``kind`` as Stripe words it)."""
    return StripeError(404, f"No such {kind}: '{object_id}'", code="resource_missing", param=param)


def parameter_unknown(param: str) -> StripeError:
    return invalid(f"Received unknown parameter: {param}", param, "parameter_unknown")


def parameter_missing(param: str) -> StripeError:
    return invalid(f"Missing required param: {param}.", param, "parameter_missing")


def parameter_invalid_empty(param: str) -> StripeError:
    return invalid(
        f"You passed an empty string for '{param}'. We assume empty values are an attempt to "
        f"unset a parameter; however '{param}' cannot be unset. You should remove '{param}' "
        "from your request or supply a non-empty value.",
        param,
        "parameter_invalid_empty",
    )


def parameter_invalid_integer(param: str, value: str) -> StripeError:
    return invalid(f"Invalid integer: {value}", param, "parameter_invalid_integer")


def unrecognized_url(method: str, path: str) -> StripeError:
    return StripeError(
        404,
        f"Unrecognized request URL ({method}: {path}). Please see https://stripe.com/docs or "
        "we can help at https://support.stripe.com/.",
    )


def missing_api_key() -> StripeError:
    return StripeError(
        401,
        "You did not provide an API key. You need to provide your API key in the "
        "Authorization header, using Bearer auth (e.g. 'Authorization: Bearer "
        "YOUR_SECRET_KEY'). See https://stripe.com/docs/api#authentication for details, or we "
        "can help at https://support.stripe.com/.",
    )


def invalid_api_key(key: str) -> StripeError:
    return StripeError(401, f"Invalid API Key provided: {mask_key(key)}")


def mask_key(key: str) -> str:
    """Mask a secret key as Stripe does: keep the ``sk_test_`` prefix and the last 4 chars."""
    prefix_end = key.find("_", key.find("_") + 1) + 1 if key.count("_") >= 2 else 0
    secret = key[prefix_end:]
    if len(secret) <= 4:
        return key
    return key[:prefix_end] + "*" * (len(secret) - 4) + secret[-4:]


def rate_limited() -> StripeError:
    return StripeError(
        429,
        "Request rate limit exceeded. You can learn more about rate limits here "
        "https://stripe.com/docs/rate-limits.",
        code="rate_limit",
    )


def lock_timeout() -> StripeError:
    return StripeError(
        429,
        "This object cannot be accessed right now because another API request or Stripe "
        "process is currently accessing it. If you see this error intermittently, retry the "
        "request. If you see this error frequently and are making multiple concurrent requests "
        "to a single object, make your requests serially or at a lower rate.",
        code="lock_timeout",
        headers={"Stripe-Should-Retry": "true"},
    )


def api_error(status: int = 500) -> StripeError:
    return StripeError(
        status,
        "An unknown error occurred" if status == 500 else "Stripe is temporarily unavailable.",
        type_=API_ERROR,
    )


def card_declined() -> StripeError:
    return StripeError(
        402,
        "Your card was declined.",
        type_=CARD_ERROR,
        code="card_declined",
        decline_code="generic_decline",
    )


def subscription_requires_action() -> StripeError:
    """An update with ``payment_behavior=error_if_incomplete`` whose invoice needs the
    customer's authentication: nothing was changed."""
    return StripeError(
        402,
        "Payment for this subscription requires additional user action before it can be "
        "completed successfully.",
        type_=CARD_ERROR,
        code="subscription_payment_intent_requires_action",
    )


def invoice_requires_action() -> StripeError:
    """Paying an invoice whose card needs the customer's authentication."""
    return StripeError(
        402,
        "Payment for this invoice requires additional user action before it can be completed "
        "successfully.",
        type_=CARD_ERROR,
        code="invoice_payment_intent_requires_action",
    )


def idempotency_key_in_use() -> StripeError:
    return StripeError(
        409,
        "There is currently another in-progress request using this Stripe-Idempotency-Key. "
        "Please try again later.",
        code="idempotency_key_in_use",
        headers={"Stripe-Should-Retry": "true"},
    )


def idempotency_params_mismatch(key: str) -> StripeError:
    return StripeError(
        400,
        "Keys for idempotent requests can only be used with the same parameters they were "
        f"first used with. Try using a key other than '{key}' if you meant to execute a "
        "different request.",
        type_=IDEMPOTENCY_ERROR,
    )


def idempotency_endpoint_mismatch(key: str, first: str, now: str) -> StripeError:
    return StripeError(
        400,
        "Keys for idempotent requests can only be used for the same endpoint they were first "
        f"used for ('{first}' vs '{now}'). Try using a key other than '{key}' if you meant to "
        "execute a different request.",
        type_=IDEMPOTENCY_ERROR,
    )
