"""Authentication of clients (spec section 5): Basic credentials, throttled when they fail."""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Sequence
from typing import Annotated

from fastapi import Depends, Request

from domain.errors import ErrorCode, error_info
from worker.api.errors import ApiError
from worker.api.state import State
from worker.clients import FailureThrottle


def basic_credentials(header: str) -> tuple[str, str] | None:
    """The client id and secret of an ``Authorization: Basic`` header, if it holds them."""
    scheme, _, encoded = header.partition(" ")
    if scheme.lower() != "basic" or not encoded:
        return None
    try:
        client_id, sep, secret = base64.b64decode(encoded, validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return None
    return (client_id, secret) if sep and client_id else None


def throttled(throttles: Sequence[tuple[FailureThrottle, str]]) -> ApiError | None:
    """The 429 for keys over their failed-authentication limit, if any is."""
    waits = [wait for throttle, key in throttles if (wait := throttle.retry_after(key))]
    if not waits:
        return None
    seconds = max(1, math.ceil(max(waits)))
    return ApiError(
        ErrorCode.RESOURCE_EXHAUSTED,
        f"too many failed authentications; try again in {seconds}s",
        details=[error_info("AUTHENTICATION_THROTTLED", retry_after_seconds=str(seconds))],
        status=429,
        headers={"Retry-After": str(seconds)},
    )


async def authenticated_client(request: Request, state: State) -> str:
    """The client id of valid Basic credentials (spec section 5), or 401."""
    challenge = {"WWW-Authenticate": 'Basic realm="billing-worker", charset="UTF-8"'}
    header = request.headers.get("authorization", "")
    if not header:
        raise ApiError(ErrorCode.UNAUTHENTICATED, "authentication is required", headers=challenge)
    credentials = basic_credentials(header)
    if credentials is None:
        raise ApiError(ErrorCode.UNAUTHENTICATED, "malformed Basic credentials", headers=challenge)
    client_id, secret = credentials
    authenticator = state.authenticator
    if authenticator.cached(client_id, secret):  # no thread, no hash: unaffected by floods
        return client_id
    # The source is the peer address: behind a proxy, the proxy's limits are the ones to set.
    source = request.client.host if request.client else "?"
    throttles = ((state.failures_by_client, client_id), (state.failures_by_source, source))
    refusal = throttled(throttles)
    if refusal is not None:
        await state.refusal_hold.hold()
        raise refusal
    # Counted as failed before the hash, so that guesses sent at once cannot overrun the
    # limit while they are being verified; forgiven if the secret proves right.
    attempts = [(throttle, key, throttle.failed(key)) for throttle, key in throttles]
    if not await authenticator.verify_async(client_id, secret):
        raise ApiError(ErrorCode.UNAUTHENTICATED, "invalid client credentials", headers=challenge)
    for throttle, key, at in attempts:
        throttle.forgive(key, at)
    return client_id


Client = Annotated[str, Depends(authenticated_client)]
"""The authenticated client id of a request (a route's parameter)."""
