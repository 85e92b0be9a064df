"""How Stripe's failures become domain errors (retry or not, and what the caller sees)."""

from __future__ import annotations

from typing import Any

import pytest
import stripe  # noqa: TID251 - the adapter's inputs are the SDK's own exceptions

from adapters.provider.stripe_errors import translate
from adapters.provider.stripe_fields import (
    field_for_param,
    plan_field,
    price_field,
    subscription_field,
)
from adapters.provider.stripe_requests import STRIPE_API_VERSION
from domain.errors import (
    CommandError,
    ErrorCode,
    Internal,
    InvalidArgument,
    TransientError,
    Unavailable,
)
from domain.messages import CommandStatus
from domain.operations.outcomes import ended_as


def stripe_error(
    kind: type[stripe.StripeError],
    status: int | None,
    *,
    code: str = "",
    param: str | None = None,
    headers: dict[str, str] | None = None,
    message: str = "boom",
) -> stripe.StripeError:
    body: dict[str, Any] = {"error": {"type": "x", "message": message, "code": code or None}}
    if param:
        body["error"]["param"] = param
    common: dict[str, Any] = {
        "http_status": status,
        "json_body": body,
        "headers": headers or {},
        "code": code,
    }
    if issubclass(kind, stripe.InvalidRequestError | stripe.CardError):
        return kind(message, param, **common)
    return kind(message, **common)


@pytest.mark.parametrize(
    "error",
    [
        stripe_error(stripe.APIConnectionError, None, message="connection reset"),
        stripe_error(stripe.RateLimitError, 429, code="rate_limit"),
        stripe_error(stripe.RateLimitError, 429, code="lock_timeout"),
        stripe_error(stripe.APIError, 500),
        stripe_error(stripe.APIError, 503),
        stripe_error(stripe.InvalidRequestError, 409, headers={"Stripe-Should-Retry": "true"}),
    ],
    ids=["connection", "429", "lock-timeout", "500", "503", "should-retry"],
)
def test_transient_failures_are_retried(error: stripe.StripeError) -> None:
    assert isinstance(translate(error, "create customer"), TransientError)


def test_retry_after_is_passed_on() -> None:
    error = stripe_error(stripe.RateLimitError, 429, headers={"Retry-After": "7"})
    translated = translate(error, "create customer")
    assert isinstance(translated, TransientError)
    assert translated.retry_after == 7.0


def test_a_5xx_stripe_says_not_to_retry_is_not_retried() -> None:
    error = stripe_error(stripe.APIError, 500, headers={"Stripe-Should-Retry": "false"})
    translated = translate(error, "create customer")
    assert isinstance(translated, Unavailable)


def test_a_rejected_tax_id_is_an_invalid_argument_on_our_field_with_stripes_message() -> None:
    error = stripe_error(
        stripe.InvalidRequestError,
        400,
        code="tax_id_invalid",
        param="tax_id_data[1][value]",
        message="Invalid value for eu_vat.",
    )
    translated = translate(error, "create customer")
    assert isinstance(translated, InvalidArgument)
    body = translated.to_body()
    assert body["code"] == ErrorCode.INVALID_ARGUMENT
    violation = body["details"][0]["fieldViolations"][0]
    assert violation == {
        "field": "account.tax_data[1].id",
        "description": "Invalid value for eu_vat.",
    }
    assert body["details"][1]["metadata"]["stripe_code"] == "tax_id_invalid"


def test_bad_credentials_are_an_internal_error_not_the_callers() -> None:
    error = stripe_error(stripe.AuthenticationError, 401)
    assert isinstance(translate(error, "create customer"), Internal)


@pytest.mark.parametrize(
    ("param", "field"),
    [
        (None, "account"),
        ("email", "account.email"),
        ("address[postal_code]", "account.address.postal_code"),
        ("tax_id_data[0][type]", "account.tax_data[0].type"),
        ("metadata[seats]", "account.metadata"),
        ("expand", "account"),
    ],
)
def test_stripe_params_are_named_as_the_create_commands_fields(
    param: str | None, field: str
) -> None:
    assert field_for_param(param) == field


@pytest.mark.parametrize(
    ("param", "field"),
    [
        ("customer", "billing_account"),
        ("items[0][price]", "plan"),
        ("items", "plan"),
        ("currency", "plan"),
        ("collection_method", "collection"),
        ("days_until_due", "days_until_due"),
        ("trial_period_days", "trial_days"),
        ("metadata[subscription_id]", "subscription"),
        (None, "subscription"),
    ],
)
def test_stripe_params_of_a_subscription_creation_are_named_as_its_inputs(
    param: str | None, field: str
) -> None:
    assert subscription_field(param) == field


@pytest.mark.parametrize(
    ("param", "field"),
    [
        ("currency", "currency"),
        ("unit_amount", "amount"),
        ("recurring[interval]", "interval"),
        ("nickname", "title"),
        ("product_data[name]", "title"),
        ("metadata[plan_id]", "plan"),
        (None, "plan"),
    ],
)
def test_stripe_params_of_a_price_creation_are_named_as_the_plans_fields(
    param: str | None, field: str
) -> None:
    assert price_field(param) == field


@pytest.mark.parametrize("param", ["items[0][price]", "proration_behavior", None])
def test_every_stripe_param_of_a_subscription_update_is_about_the_plan(param: str | None) -> None:
    assert plan_field(param) == "plan"


def test_a_customer_missing_at_stripe_is_blamed_on_the_billing_account_not_the_plan() -> None:
    error = stripe_error(
        stripe.InvalidRequestError,
        404,
        code="resource_missing",
        param="customer",
        message="No such customer: 'cus_gone'",
    )

    translated = translate(error, "create subscription", subscription_field)

    assert isinstance(translated, InvalidArgument)
    body = translated.to_body()
    assert body["details"][0]["fieldViolations"] == [
        {"field": "billing_account", "description": "No such customer: 'cus_gone'"}
    ]
    assert body["details"][1]["metadata"]["param"] == "customer"


def test_the_pinned_stripe_api_version_is_the_one_the_sdk_is_written_for() -> None:
    # An SDK upgrade that moves its version fails here: read Stripe's changelog for what
    # changed between the two, then move STRIPE_API_VERSION on purpose.
    assert stripe.api_version == STRIPE_API_VERSION


@pytest.mark.parametrize(
    ("error", "ended"),
    [
        (
            stripe_error(stripe.InvalidRequestError, 400, code="email_invalid", param="email"),
            CommandStatus.REJECTED,
        ),
        (stripe_error(stripe.CardError, 402, code="card_declined"), CommandStatus.REJECTED),
        (stripe_error(stripe.AuthenticationError, 401), CommandStatus.FAILED),
        (stripe_error(stripe.PermissionError, 403), CommandStatus.FAILED),
        (stripe_error(stripe.IdempotencyError, 400), CommandStatus.FAILED),
        (
            stripe_error(stripe.APIError, 500, headers={"Stripe-Should-Retry": "false"}),
            CommandStatus.FAILED,
        ),
    ],
    ids=["4xx-about-the-callers-data", "card-declined", "401", "403", "idempotency", "5xx-final"],
)
def test_a_stripe_refusal_of_the_callers_data_is_rejected_and_one_of_ours_failed(
    error: stripe.StripeError, ended: CommandStatus
) -> None:
    translated = translate(error, "create customer")

    assert isinstance(translated, CommandError)
    assert ended_as(translated.to_body()) is ended
