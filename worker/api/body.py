"""Reading a request's body: one JSON object in UTF-8, at most :data:`MAX_BODY_BYTES`."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Path, Request

from domain.errors import ErrorCode
from worker.api.errors import ApiError
from worker.api.strict_json import BodyRejected, parse_object

MAX_BODY_BYTES = 4 * 1024 * 1024  # room for a 2 MB avatar, base64-encoded, and the rest


def too_large() -> ApiError:
    """The 413 for a body over :data:`MAX_BODY_BYTES`."""
    return ApiError(
        ErrorCode.OUT_OF_RANGE, f"the body is larger than {MAX_BODY_BYTES} bytes", status=413
    )


def _check_media_type(header: str | None) -> None:
    """JSON in UTF-8: ``application/json`` or a ``+json`` type, in any case (RFC 9110)."""
    media_type, *parameters = (header or "application/json").split(";")
    media_type = media_type.strip().lower()
    if media_type != "application/json" and not media_type.endswith("+json"):
        raise ApiError(ErrorCode.INVALID_ARGUMENT, "the body must be application/json", status=415)
    for parameter in parameters:
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "charset" and value.strip().strip('"').lower() != "utf-8":
            raise ApiError(ErrorCode.INVALID_ARGUMENT, "the body must be UTF-8", status=415)


async def json_object(request: Request) -> dict[str, Any]:
    """The request body, which must be one JSON object (read strictly: strict_json.py)."""
    _check_media_type(request.headers.get("content-type"))
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise too_large()
    received = bytearray()
    async for chunk in request.stream():  # chunked bodies are counted as they come
        received += chunk
        if len(received) > MAX_BODY_BYTES:
            raise too_large()
    try:
        return parse_object(bytes(received))
    except BodyRejected as rejected:
        raise ApiError.bad_request(rejected.message, rejected.violations) from None


Body = Annotated[dict[str, Any], Depends(json_object)]
"""The request's JSON object (a route's parameter)."""

PathId = Annotated[str, Path(min_length=1, max_length=128)]
"""An identifier in a route's path."""


def require_empty(body: dict[str, Any]) -> None:
    """Refuse a body with any field, for operations that take none."""
    if body:
        raise ApiError.bad_request(
            "the body must be an empty JSON object",
            [(name, "unknown field") for name in sorted(body)],
        )
