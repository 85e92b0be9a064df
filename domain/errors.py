"""Error codes and the exceptions a command can end with.

Codes are gRPC's canonical status codes (the spec's error body ``{code, message, details}``
comes from a gRPC-gateway service). ``details`` elements are google.rpc error-detail messages
in their proto3 JSON form, each tagged with ``@type``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from enum import IntEnum
from typing import Any, TypeVar

ErrorDetail = dict[str, Any]
T = TypeVar("T")

BAD_REQUEST = "type.googleapis.com/google.rpc.BadRequest"
ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
RESOURCE_INFO = "type.googleapis.com/google.rpc.ResourceInfo"
ERROR_DOMAIN = "billing-worker"


class ErrorCode(IntEnum):
    """gRPC canonical codes; the subset we emit is documented in the README."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16


def field_path(loc: Sequence[int | str], field_names: Mapping[str, str] | None = None) -> str:
    """A field as errors name it: ``("account", "tax_data", 0, "type")`` →
    ``account.tax_data[0].type``, its first part renamed by ``field_names`` if listed there
    (the API names a command's fields as its request does)."""
    path = ""
    for index, part in enumerate(loc):
        if isinstance(part, int):
            path += f"[{part}]"
            continue
        name = (field_names or {}).get(part, part) if index == 0 else part
        path += f".{name}" if path else name
    return path


def violations_of(
    problems: Iterable[Mapping[str, Any]],
    field_names: Mapping[str, str] | None = None,
    *,
    drop: Iterable[str] = (),
) -> list[tuple[str, str]]:
    """``(field, why)`` for each problem of a validation error (pydantic's ``errors()``),
    leaving out the location parts in ``drop`` (FastAPI's ``body``, ``path``…)."""
    dropped = frozenset(drop)
    return [
        (
            field_path(
                [part for part in problem.get("loc", ()) if part not in dropped], field_names
            )
            or "(message)",
            str(problem.get("msg", "invalid")),
        )
        for problem in problems
    ]


def field_violations(violations: Iterable[tuple[str, str]]) -> ErrorDetail:
    """A google.rpc.BadRequest detail listing each offending field and why."""
    return {
        "@type": BAD_REQUEST,
        "fieldViolations": [
            {"field": field, "description": description} for field, description in violations
        ],
    }


def error_info(reason: str, **metadata: str) -> ErrorDetail:
    """A google.rpc.ErrorInfo detail: a stable machine-readable reason and context."""
    return {"@type": ERROR_INFO, "reason": reason, "domain": ERROR_DOMAIN, "metadata": metadata}


def resource_info(resource_type: str, resource_name: str, description: str = "") -> ErrorDetail:
    """A google.rpc.ResourceInfo detail naming the resource an error is about."""
    return {
        "@type": RESOURCE_INFO,
        "resourceType": resource_type,
        "resourceName": resource_name,
        "description": description,
    }


class CommandError(Exception):
    """A command ended without doing its work, for a reason the caller must see.

    Never retried: running the same command again gives the same answer.
    """

    code: ErrorCode = ErrorCode.UNKNOWN

    def __init__(self, message: str, *, details: Sequence[ErrorDetail] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.details = list(details)

    def to_body(self) -> dict[str, Any]:
        """The spec's error body (section 7)."""
        return {"code": int(self.code), "message": self.message, "details": self.details}

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> CommandError:
        """Rebuild an error recorded with :meth:`to_body`, keeping its code."""
        error = cls(str(body.get("message", "")), details=list(body.get("details", [])))
        error.code = ErrorCode(int(body.get("code", ErrorCode.UNKNOWN)))
        return error


class InvalidArgument(CommandError):
    code = ErrorCode.INVALID_ARGUMENT

    @classmethod
    def for_fields(cls, message: str, violations: Iterable[tuple[str, str]]) -> InvalidArgument:
        return cls(message, details=[field_violations(violations)])


class GoneAtProvider(InvalidArgument):
    """The object a provider request addressed does not exist there: deleted, or never made
    (Stripe's ``resource_missing`` on the request's own id, a 404).

    Raised only by the provider's adapter, and caught only where "gone" is what is meant (a
    sync marks the object missing, a change at the period's end is skipped). Every other
    refusal, a missing object a parameter names included (a price, a customer), is a plain
    :class:`InvalidArgument`, never read as gone. A command that meets it and does not catch it
    ends as before, ``INVALID_ARGUMENT`` with the provider's words.
    """


class NotFound(CommandError):
    code = ErrorCode.NOT_FOUND

    @classmethod
    def resource(cls, resource_type: str, resource_id: str) -> NotFound:
        return cls(
            f"{resource_type} {resource_id!r} not found",
            details=[resource_info(resource_type, resource_id)],
        )


def found(value: T | None, resource_type: str, resource_id: str) -> T:
    """``value``, unless it is ``None``: then the resource was not found (404)."""
    if value is None:
        raise NotFound.resource(resource_type, resource_id)
    return value


class AlreadyExists(CommandError):
    code = ErrorCode.ALREADY_EXISTS


class FailedPrecondition(CommandError):
    code = ErrorCode.FAILED_PRECONDITION


class PaymentFailed(FailedPrecondition):
    """The provider could not collect the invoice a change makes, and made nothing."""


class PaymentActionRequired(PaymentFailed):
    """The customer's bank asks the customer to authenticate the payment (3-D Secure) before
    the provider can collect it: Stripe's 402 ``subscription_payment_intent_requires_action``
    to an update sent with ``error_if_incomplete``, which made nothing."""


class PermissionDenied(CommandError):
    code = ErrorCode.PERMISSION_DENIED


class Aborted(CommandError):
    """The request met a change under way (gRPC's ``ABORTED``, HTTP 409): the same request,
    sent again shortly, can succeed."""

    code = ErrorCode.ABORTED


class Internal(CommandError):
    code = ErrorCode.INTERNAL


class Unavailable(CommandError):
    """A dependency stayed unavailable for the whole retry budget."""

    code = ErrorCode.UNAVAILABLE


class CommandInProgress(Exception):
    """Another delivery of the same command is running it right now (a duplicate message):
    this one must wait and look again, not run the handler a second time concurrently."""


class CommandIdReused(Exception):
    """A message names the id of a command of another type or payload: it is not that
    command, and must not replay that command's outcome."""

    def __init__(self, command_id: str, recorded_type: str) -> None:
        super().__init__(f"command id {command_id!r} names another command ({recorded_type})")
        self.command_id = command_id
        self.recorded_type = recorded_type


class UniquenessViolation(AlreadyExists):
    """A write would break a uniqueness rule (raised by a unit of work's ``commit``).

    An ``AlreadyExists``: a clash no handler expected still ends as a refusal (code 6), never
    as a database error; handlers that can say which record is in the way catch it first.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)

    @classmethod
    def taken(cls, what: str, value: str, holder_id: str) -> AlreadyExists:
        """``organization name 'acme' is taken (org_…)``."""
        return AlreadyExists(
            f"{what} {value!r} is taken ({holder_id})", details=[resource_info(what, holder_id)]
        )


class TransientError(Exception):
    """A failure worth retrying: connection errors, 429, 5xx, lock timeouts.

    ``retry_after`` is the dependency's own hint in seconds, when it gave one.
    """

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after = retry_after
