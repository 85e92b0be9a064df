"""Authentication of clients (spec section 5): Basic credentials, throttled when they fail."""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fastapi import Depends, Request

from domain.errors import CommandError, ErrorCode, error_info
from domain.permissions import Grant, Scope
from worker.api.errors import ApiError
from worker.api.shared_throttle import SharedFailures, take
from worker.api.state import State, api_state
from worker.api.verifications import TOO_MANY_FAILURES, Throttled


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


async def throttled(throttles: Sequence[tuple[SharedFailures, str]]) -> ApiError | None:
    """The 429 for keys over their failed-authentication limit, if any is."""
    wait = (await take(throttles, token=None)).retry_after
    return None if wait is None else refusal(wait)


def refusal(retry_after: float, reason: str = TOO_MANY_FAILURES) -> ApiError:
    """The 429 of an attempt refused before any hash, ``retry_after`` seconds away."""
    seconds = max(1, math.ceil(retry_after))
    return ApiError(
        ErrorCode.RESOURCE_EXHAUSTED,
        f"{reason}; try again in {seconds}s",
        details=[error_info("AUTHENTICATION_THROTTLED", retry_after_seconds=str(seconds))],
        status=429,
        headers={"Retry-After": str(seconds)},
    )


@dataclass(frozen=True)
class Caller:
    """An authenticated client, and what it may do."""

    client_id: str
    grant: Grant


async def authenticated_client(request: Request, state: State) -> Caller:
    """The client of valid Basic credentials (spec section 5), or 401 (also for a disabled
    client)."""
    challenge = {"WWW-Authenticate": 'Basic realm="billing-worker", charset="UTF-8"'}
    header = request.headers.get("authorization", "")
    if not header:
        raise ApiError(ErrorCode.UNAUTHENTICATED, "authentication is required", headers=challenge)
    credentials = basic_credentials(header)
    if credentials is None:
        raise ApiError(ErrorCode.UNAUTHENTICATED, "malformed Basic credentials", headers=challenge)
    client_id, secret = credentials
    # Cached: no thread, no hash, unaffected by floods.
    if (grant := state.authenticator.cached(client_id, secret)) is not None:
        return Caller(client_id, grant)
    # The peer address, or the client a trusted proxy forwarded (worker/api/sources.py).
    source = request.client.host if request.client else "?"
    try:
        grant = await state.verifications.verify(client_id, secret, source)
    except Throttled as refused:
        await state.refusal_hold.hold()
        raise refusal(refused.retry_after, refused.reason) from None
    if grant is None:
        raise ApiError(ErrorCode.UNAUTHENTICATED, "invalid client credentials", headers=challenge)
    return Caller(client_id, grant)


def permitted(scope: Scope) -> Any:
    """A route's dependency: the authenticated client, if it holds ``scope`` (in the
    organization of the path's ``org_id``, when there is one), else 403 naming what is
    missing. Decided from the request alone, before the body is read or anything is
    loaded, so a refusal never tells whether the resource exists."""

    async def check(request: Request) -> Caller:
        # Called here rather than as a dependency of its own: each dependency costs FastAPI
        # a resolution of its parameters on every request.
        caller = await authenticated_client(request, api_state(request))
        try:
            caller.grant.check(scope, request.path_params.get("org_id"))
        except CommandError as refused:
            raise ApiError.of(refused) from None
        return caller

    return Depends(check)
