"""Rejected or failed (``domain.operations.outcomes``): who acts on a command that ended in an
error."""

from __future__ import annotations

from typing import Any

import pytest

from domain.errors import (
    AlreadyExists,
    CommandError,
    ErrorCode,
    FailedPrecondition,
    Internal,
    InvalidArgument,
    NotFound,
    PaymentFailed,
    PermissionDenied,
    Unavailable,
    UniquenessViolation,
    error_info,
    field_violations,
)
from domain.messages import CommandStatus
from domain.operations.outcomes import ended_as, error_line, error_reason, is_callers_mistake


@pytest.mark.parametrize(
    "error",
    [
        InvalidArgument.for_fields("the command message is invalid", [("user_id", "required")]),
        NotFound.resource("user", "usr_nobody"),
        AlreadyExists("organization 'acme' already has a billing account"),
        UniquenessViolation("a write broke a uniqueness rule"),
        PermissionDenied("client cli_1 may not act in org_2"),
        FailedPrecondition(
            "organization 'org_1' is disabled",
            details=[error_info("ORGANIZATION_DISABLED", org_id="org_1")],
        ),
        PaymentFailed(
            "the billing provider could not collect the change's invoice: card declined",
            details=[error_info("PAYMENT_FAILED", decline_code="generic_decline")],
        ),
        InvalidArgument(
            "the billing provider rejected the request: Invalid value for eu_vat.",
            details=[
                field_violations([("account.tax_data[0].id", "Invalid value for eu_vat.")]),
                error_info("PROVIDER_REJECTED", status="400"),
            ],
        ),
    ],
    ids=[
        "invalid",
        "not-found",
        "conflict",
        "uniqueness",
        "not-permitted",
        "precondition",
        "card-declined",
        "provider-4xx-about-the-callers-data",
    ],
)
def test_a_callers_mistake_is_rejected(error: CommandError) -> None:
    body = error.to_body()

    assert is_callers_mistake(body)
    assert ended_as(body) is CommandStatus.REJECTED


@pytest.mark.parametrize(
    "error",
    [
        Unavailable(
            "gave up after 4 attempts: stripe create customer: 503",
            details=[error_info("RETRY_BUDGET_EXHAUSTED", attempts="4")],
        ),
        Unavailable(
            "stripe create customer failed and Stripe says a retry will not help",
            details=[error_info("PROVIDER_UNAVAILABLE", status="500")],
        ),
        Internal("internal error", details=[error_info("UNEXPECTED", exception="KeyError")]),
        Internal(
            "the billing provider refused our credentials",
            details=[error_info("PROVIDER_CREDENTIALS", status="401")],
        ),
        Internal(
            "plan 'plan_team' has no price at the provider",
            details=[error_info("PLAN_WITHOUT_PRICE", plan_id="plan_team")],
        ),
        FailedPrecondition(
            "no billing provider is configured (BILLING_STRIPE_API_KEY is unset)",
            details=[error_info("PROVIDER_NOT_CONFIGURED")],
        ),
        FailedPrecondition(
            "Stripe subscription sub_1 was made for subscription 'sub_a' and bills another price",
            details=[error_info("PROVIDER_SUBSCRIPTION_EXISTS", subscription_id="sub_a")],
        ),
    ],
    ids=[
        "retries-exhausted",
        "provider-unavailable",
        "our-bug",
        "our-credentials",
        "our-catalog",
        "provider-not-configured",
        "provider-drift",
    ],
)
def test_what_an_operator_acts_on_fails(error: CommandError) -> None:
    body = error.to_body()

    assert not is_callers_mistake(body)
    assert ended_as(body) is CommandStatus.FAILED


@pytest.mark.parametrize(
    "body",
    [{}, {"code": "x"}, {"code": 99}, {"code": None, "details": None}],
    ids=["no-code", "not-a-number", "unknown-code", "nulls"],
)
def test_an_error_body_we_cannot_read_is_an_operators_failure(body: dict[str, Any]) -> None:
    assert ended_as(body) is CommandStatus.FAILED


def test_a_reason_is_the_last_error_info_else_the_codes_name() -> None:
    exhausted = Unavailable(
        "gave up",
        details=[error_info("TRANSIENT_FAILURE"), error_info("RETRY_BUDGET_EXHAUSTED")],
    )

    assert error_reason(exhausted.to_body()) == "RETRY_BUDGET_EXHAUSTED"
    assert error_reason(NotFound.resource("user", "u").to_body()) == "NOT_FOUND"
    assert error_reason({"code": int(ErrorCode.INTERNAL)}) == "INTERNAL"


def test_an_error_reads_as_one_line_with_its_code_reason_message_and_fields() -> None:
    error = InvalidArgument(
        "the request\nis invalid",
        details=[
            field_violations([("account.email", "not an email"), ("account.name", "required")]),
            error_info("PROVIDER_REJECTED", status="400"),
        ],
    )

    assert error_line(error.to_body()) == (
        "INVALID_ARGUMENT (3) PROVIDER_REJECTED: the request is invalid; "
        "account.email: not an email; account.name: required"
    )
    assert error_line(NotFound.resource("user", "usr_x").to_body()) == (
        "NOT_FOUND (5): user 'usr_x' not found"
    )
    assert error_line({}) == "UNKNOWN (2): (no message)"


def test_a_field_named_by_an_error_info_is_shown() -> None:
    error = FailedPrecondition(
        "plan 'old' is not available",
        details=[error_info("PLAN_NOT_AVAILABLE", plan_id="plan_old", field="plan")],
    )

    assert error_line(error.to_body()) == (
        "FAILED_PRECONDITION (9) PLAN_NOT_AVAILABLE: plan 'old' is not available; plan"
    )
