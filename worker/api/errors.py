"""Every error leaves the API in the spec's body ``{code, message, details}`` (section 7)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from domain.errors import (
    CommandError,
    ErrorCode,
    ErrorDetail,
    error_info,
    field_violations,
    violations_of,
)

logger = logging.getLogger(__name__)

# The mapping grpc-gateway uses from gRPC codes to HTTP statuses.
HTTP_STATUS: dict[ErrorCode, int] = {
    ErrorCode.OK: 200,
    ErrorCode.CANCELLED: 499,
    ErrorCode.UNKNOWN: 500,
    ErrorCode.INVALID_ARGUMENT: 400,
    ErrorCode.DEADLINE_EXCEEDED: 504,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.ALREADY_EXISTS: 409,
    ErrorCode.PERMISSION_DENIED: 403,
    ErrorCode.RESOURCE_EXHAUSTED: 429,
    ErrorCode.FAILED_PRECONDITION: 400,
    ErrorCode.ABORTED: 409,
    ErrorCode.OUT_OF_RANGE: 400,
    ErrorCode.UNIMPLEMENTED: 501,
    ErrorCode.INTERNAL: 500,
    ErrorCode.UNAVAILABLE: 503,
    ErrorCode.DATA_LOSS: 500,
    ErrorCode.UNAUTHENTICATED: 401,
}

_CODE_FOR_STATUS = {
    400: ErrorCode.INVALID_ARGUMENT,
    401: ErrorCode.UNAUTHENTICATED,
    403: ErrorCode.PERMISSION_DENIED,
    404: ErrorCode.NOT_FOUND,
    405: ErrorCode.UNIMPLEMENTED,
    409: ErrorCode.ABORTED,
    413: ErrorCode.OUT_OF_RANGE,
    415: ErrorCode.INVALID_ARGUMENT,
    422: ErrorCode.INVALID_ARGUMENT,
    429: ErrorCode.RESOURCE_EXHAUSTED,
    503: ErrorCode.UNAVAILABLE,
}


class ApiError(Exception):
    """An error answered directly by the API (before or instead of running a command)."""

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        *,
        details: Sequence[ErrorDetail] = (),
        status: int | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = list(details)
        self.status = status or HTTP_STATUS[code]
        self.headers = headers or {}

    @classmethod
    def of(cls, error: CommandError) -> ApiError:
        return cls(error.code, error.message, details=error.details)

    @classmethod
    def bad_request(cls, message: str, violations: Sequence[tuple[str, str]]) -> ApiError:
        return cls(ErrorCode.INVALID_ARGUMENT, message, details=[field_violations(violations)])


def error_response(
    status: int, body: dict[str, Any], headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(body, status_code=status, headers=headers)


def body_of(code: ErrorCode, message: str, details: Sequence[ErrorDetail] = ()) -> dict[str, Any]:
    return {"code": int(code), "message": message, "details": list(details)}


def unavailable(error: BaseException) -> JSONResponse:
    """The 503 for a database that is busy or unreachable: the caller retries shortly."""
    logger.warning("database busy or unreachable: %s", error)
    return error_response(
        503,
        body_of(
            ErrorCode.UNAVAILABLE,
            "the service is busy; retry shortly",
            [error_info("DATABASE_UNAVAILABLE")],
        ),
        {"Retry-After": "1"},
    )


class TransientAsUnavailable:
    """Answers 503 (:func:`unavailable`) for an error ``is_transient`` recognises that
    escapes the routes before an answer started, and lets every other error through."""

    def __init__(self, app: ASGIApp, is_transient: Callable[[BaseException], bool]) -> None:
        self.app = app
        self.is_transient = is_transient

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def send_and_remember(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, send_and_remember)
        except Exception as error:
            if started or not self.is_transient(error):
                raise
            await unavailable(error)(scope, receive, send)


def install_error_handlers(app: FastAPI, *, is_transient: Callable[[BaseException], bool]) -> None:
    """Answer every error in the spec's body; ``is_transient`` tells a database that is busy
    or unreachable (a 503 to retry) from a fault of ours (a 500)."""

    @app.exception_handler(ApiError)
    async def _api_error(_: Request, error: ApiError) -> JSONResponse:
        return error_response(
            error.status, body_of(error.code, error.message, error.details), error.headers
        )

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, error: RequestValidationError) -> JSONResponse:
        violations = violations_of(error.errors(), drop=("body", "path", "query", "header"))
        return error_response(
            400,
            body_of(
                ErrorCode.INVALID_ARGUMENT, "the request is invalid", [field_violations(violations)]
            ),
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, error: StarletteHTTPException) -> JSONResponse:
        code = _CODE_FOR_STATUS.get(error.status_code, ErrorCode.UNKNOWN)
        message = str(error.detail) if error.detail else "error"
        return error_response(error.status_code, body_of(code, message), dict(error.headers or {}))

    @app.exception_handler(ClientDisconnect)
    async def _gone(_: Request, error: ClientDisconnect) -> JSONResponse:
        # The client left (or missed its read deadline) while its body was being read: the
        # answer goes nowhere, and nothing went wrong on our side.
        return error_response(
            400, body_of(ErrorCode.CANCELLED, "the client disconnected before its body arrived")
        )

    # Innermost: a busy or unreachable database is answered here, where the error leaves the
    # routes. Starlette's handler of last resort (``Exception``, below) answers too, but then
    # raises the error again, and uvicorn closes the connection under the client's feet.
    app.add_middleware(TransientAsUnavailable, is_transient=is_transient)

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, error: Exception) -> JSONResponse:
        if is_transient(error):
            return unavailable(error)
        incident = uuid.uuid4().hex
        logger.exception("unexpected error, incident %s", incident)
        return error_response(
            500,
            body_of(
                ErrorCode.INTERNAL, "internal error", [error_info("INTERNAL", incident=incident)]
            ),
        )
