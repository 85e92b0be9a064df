"""Rejected or failed: who acts on a command that ended without doing its work.

A command the **caller** got wrong ends ``rejected``: its message did not validate, what it
names does not exist, it conflicts with what exists, it is not permitted, the resource is in
a state that forbids it, or the billing provider refused the caller's data (a 4xx about a
value the command carried, a declined card). Running it again gives the same answer: the
caller must send a corrected command. No operator is paged for it, it is kept only briefly,
and it is never replayed.

Everything else ends ``failed``, for an **operator**: a dependency that stayed unavailable
for the whole retry budget, our own faults (an internal error, the provider refusing our
credentials or our idempotency key, a plan without a price), and the few refusals that carry
a caller's code but are about the system's own setup (no billing provider configured, a
provider object that drifted from ours). The operator fixes the cause, then replays.

The rule reads the error body only (its code and the reasons of its ``ErrorInfo`` details),
so that an error recorded long ago is classified as a new one would be.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from domain.errors import BAD_REQUEST, ERROR_INFO, ErrorCode, FailedPrecondition, error_info
from domain.messages import CommandStatus

CALLERS_CODES = frozenset(
    {
        ErrorCode.INVALID_ARGUMENT,
        ErrorCode.NOT_FOUND,
        ErrorCode.ALREADY_EXISTS,
        ErrorCode.PERMISSION_DENIED,
        ErrorCode.FAILED_PRECONDITION,
        ErrorCode.OUT_OF_RANGE,
        ErrorCode.UNAUTHENTICATED,
    }
)
"""The codes of a caller's mistake (HTTP 4xx)."""

OPERATORS_REASONS = frozenset(
    {
        # BILLING_STRIPE_API_KEY is unset: the configuration is wrong, not the request.
        "PROVIDER_NOT_CONFIGURED",
        # A Stripe subscription made under our key bills another price: a person decides
        # (`billing-worker stripe drift`).
        "PROVIDER_SUBSCRIPTION_EXISTS",
    }
)
"""Reasons that make an error the operator's although its code is a caller's."""


def error_code(error: Mapping[str, Any]) -> ErrorCode:
    """The body's code; ``UNKNOWN`` when it has none we know."""
    try:
        return ErrorCode(int(error.get("code", ErrorCode.UNKNOWN)))
    except (TypeError, ValueError):
        return ErrorCode.UNKNOWN


def error_reasons(error: Mapping[str, Any]) -> list[str]:
    """The ``reason`` of each ``ErrorInfo`` detail of an error body, in order."""
    return [
        str(detail["reason"])
        for detail in error.get("details") or []
        if isinstance(detail, Mapping) and detail.get("@type") == ERROR_INFO and "reason" in detail
    ]


def is_callers_mistake(error: Mapping[str, Any]) -> bool:
    """Whether the caller, not an operator, must act on a command that ended with ``error``."""
    if error_code(error) not in CALLERS_CODES:
        return False
    return not OPERATORS_REASONS.intersection(error_reasons(error))


def ended_as(error: Mapping[str, Any]) -> CommandStatus:
    """``rejected`` for a caller's mistake, ``failed`` for anything an operator acts on."""
    return CommandStatus.REJECTED if is_callers_mistake(error) else CommandStatus.FAILED


def error_reason(error: Mapping[str, Any]) -> str:
    """The error's most specific reason: its last ``ErrorInfo`` reason (``PROVIDER_REJECTED``,
    ``RETRY_BUDGET_EXHAUSTED``), else its code's name (``NOT_FOUND``). A bounded set, fit for
    a metric's label."""
    reasons = error_reasons(error)
    return reasons[-1] if reasons else error_code(error).name


def error_fields(error: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(field, why)`` of each field an error body blames: its ``BadRequest`` violations, or
    an ``ErrorInfo``'s ``field`` metadata."""
    fields: list[tuple[str, str]] = []
    for detail in error.get("details") or []:
        if not isinstance(detail, Mapping):
            continue
        if detail.get("@type") == BAD_REQUEST:
            fields.extend(
                (str(violation.get("field", "")), str(violation.get("description", "")))
                for violation in detail.get("fieldViolations") or []
                if isinstance(violation, Mapping)
            )
        elif detail.get("@type") == ERROR_INFO:
            field = (detail.get("metadata") or {}).get("field")
            if field:
                fields.append((str(field), ""))
    return fields


def error_line(error: Mapping[str, Any]) -> str:
    """An error body as one readable line: its code, its reason, its message and the fields
    it blames, e.g. ``INVALID_ARGUMENT (3) PROVIDER_REJECTED: the billing provider rejected
    the request: Invalid email; account.email: Invalid email``."""
    code = error_code(error)
    head = f"{code.name} ({int(code)})"
    reasons = error_reasons(error)
    if reasons:
        head += f" {reasons[-1]}"
    line = f"{head}: {error.get('message') or '(no message)'}"
    blamed = [f"{field}: {why}" if why else field for field, why in error_fields(error)]
    if blamed:
        line += "; " + "; ".join(blamed)
    return " ".join(line.split())


def not_replayable(command_id: str, error: Mapping[str, Any] | None) -> FailedPrecondition:
    """The refusal to replay a rejected command, naming why it was rejected."""
    why = error_line(error or {})
    return FailedPrecondition(
        f"command {command_id} was rejected ({why}): it was the caller's mistake and would be "
        "rejected again; the caller sends a corrected command",
        details=[error_info("COMMAND_REJECTED", command_id=command_id)],
    )
