"""The FastAPI application: routes of spec section 4 plus command status and health."""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import math
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Annotated, Any

import redis.asyncio as aioredis
from anyio import to_thread
from fastapi import Depends, FastAPI, Path, Request
from fastapi.responses import JSONResponse, Response
from fastapi_offline import FastAPIOffline
from sqlalchemy import text
from starlette.types import ASGIApp, Receive, Scope, Send

from domain.billing import CreateBillingAccount, RegisterBillingAccount
from domain.errors import CommandError, ErrorCode, error_info
from domain.scheduled_changes import ChangeSubscriptionPlan
from domain.users import EnableUser
from worker.api.change_request import resolve_change_request
from worker.api.errors import ApiError, body_of, install_error_handlers
from worker.api.gateway import CommandGateway, record_view
from worker.api.strict_json import BodyRejected, parse_object
from worker.bootstrap import Services, bootstrap
from worker.celery_app import create_celery_app
from worker.clients import ClientAuthenticator, FailureThrottle
from worker.db.engine import get_engine, session_factory
from worker.logs import install as install_log_escaping

MAX_BODY_BYTES = 4 * 1024 * 1024  # room for a 2 MB avatar, base64-encoded, and the rest


@dataclass
class RefusalHold:
    """Holds throttled refusals before they are sent, so that a flooding client spends its
    time waiting rather than sending: a held request costs the API a timer, where an
    immediate refusal invites the next request at once. At most ``capacity`` are held at
    once; beyond that, refusals go out immediately."""

    seconds: float
    capacity: int
    held: int = 0

    async def hold(self) -> None:
        if self.seconds <= 0 or self.held >= self.capacity:
            return
        self.held += 1
        try:
            await asyncio.sleep(self.seconds)
        finally:
            self.held -= 1


@dataclass
class ApiState:
    svc: Services
    gateway: CommandGateway
    authenticator: ClientAuthenticator
    failures_by_client: FailureThrottle
    failures_by_source: FailureThrottle
    refusal_hold: RefusalHold
    ready_until: float = 0.0


def _state(request: Request) -> ApiState:
    state: ApiState = request.app.state.api
    return state


State = Annotated[ApiState, Depends(_state)]


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
PathId = Annotated[str, Path(min_length=1, max_length=128)]


def _too_large() -> ApiError:
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
        raise _too_large()
    received = bytearray()
    async for chunk in request.stream():  # chunked bodies are counted as they come
        received += chunk
        if len(received) > MAX_BODY_BYTES:
            raise _too_large()
    try:
        return parse_object(bytes(received))
    except BodyRejected as rejected:
        raise ApiError.bad_request(
            rejected.message, [(rejected.field, rejected.description)]
        ) from None


Body = Annotated[dict[str, Any], Depends(json_object)]


def _require_empty(body: dict[str, Any]) -> None:
    if body:
        raise ApiError.bad_request(
            "the body must be an empty JSON object",
            [(name, "unknown field") for name in sorted(body)],
        )


def _as_is(result: dict[str, Any]) -> dict[str, Any]:
    return result


def _phase(result: dict[str, Any]) -> dict[str, Any]:
    return {"phase": result["phase"]}


DEPRECATED_FIELDS_USED = {"Deprecation": "true"}
"""Answered when a request used the deprecated top-level ``plan``/``immediate`` (spec 9)."""


def create_app(svc: Services | None = None) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        resolved = svc or bootstrap()
        settings = resolved.settings
        install_log_escaping(
            logging.getLogger(), logging.getLogger("uvicorn"), logging.getLogger("uvicorn.error")
        )
        redis = aioredis.Redis.from_url(settings.resolved_redis_url())
        celery = create_celery_app(settings)
        app.state.api = ApiState(
            svc=resolved,
            gateway=CommandGateway(
                resolved.commands, celery, redis, settings.http_wait_timeout_seconds
            ),
            authenticator=ClientAuthenticator(
                session_factory(),
                settings.auth_cache_seconds,
                max_concurrent_hashes=settings.auth_max_concurrent_hashes,
            ),
            failures_by_client=FailureThrottle(
                settings.auth_max_failures_per_client, settings.auth_failure_window_seconds
            ),
            failures_by_source=FailureThrottle(
                settings.auth_max_failures_per_source, settings.auth_failure_window_seconds
            ),
            refusal_hold=RefusalHold(
                settings.auth_throttled_hold_seconds, settings.auth_max_held_refusals
            ),
        )
        yield
        await redis.aclose()

    # Swagger UI and ReDoc from a package's files, not a CDN: /docs works offline.
    app = FastAPIOffline(
        # A trailing slash is a 404 like any unknown path, never a redirect built from Host.
        redirect_slashes=False,
        title="billing-worker",
        version="v1beta1",
        summary="Billing, user and subscription operations, performed in the background.",
        lifespan=lifespan,
    )
    install_error_handlers(app)
    app.add_middleware(BodySizeLimit, limit=MAX_BODY_BYTES)
    app.add_middleware(ThrottledSources)  # outermost: the cheapest refusal first

    @app.post("/v1beta1/users/{id}/enable", summary="Enable a user (spec 4.2)")
    async def enable_user(
        id: PathId, client: Client, body: Body, request: Request, state: State
    ) -> Response:
        _require_empty(body)
        return await state.gateway.submit(
            request,
            client,
            EnableUser,
            {"user_id": id},
            lambda _result: {},
            field_names={"user_id": "id"},
        )

    @app.post(
        "/v1beta1/organizations/{org_id}/billing",
        summary="Create a billing account (spec 4.1)",
    )
    async def create_billing_account(
        org_id: PathId, client: Client, body: Body, request: Request, state: State
    ) -> Response:
        unknown = sorted(set(body) - {"body", "offline"})
        if unknown:
            raise ApiError.bad_request(
                "the request has unknown fields", [(name, "unknown field") for name in unknown]
            )
        if "body" not in body:
            raise ApiError.bad_request(
                "the billing account is missing", [("body", "required: the billing account")]
            )
        return await state.gateway.submit(
            request,
            client,
            CreateBillingAccount,
            {"org_id": org_id, "account": body["body"], "offline": body.get("offline", False)},
            _as_is,
            field_names={"account": "body"},
        )

    @app.post(
        "/v1beta1/organizations/{org_id}/billing/{id}/register",
        summary="Register an offline billing account with the provider",
    )
    async def register_billing_account(
        org_id: PathId, id: PathId, client: Client, body: Body, request: Request, state: State
    ) -> Response:
        _require_empty(body)
        return await state.gateway.submit(
            request,
            client,
            RegisterBillingAccount,
            {"org_id": org_id, "billing_account_id": id},
            _as_is,
            field_names={"billing_account_id": "id"},
        )

    @app.post(
        "/v1beta1/organizations/{org_id}/billing/{billing_id}/subscriptions/{id}/change",
        summary="Change a subscription's plan now or at the period's end (spec 4.3)",
    )
    async def change_subscription_plan(
        org_id: PathId,
        billing_id: PathId,
        id: PathId,
        client: Client,
        body: Body,
        request: Request,
        state: State,
    ) -> Response:
        try:
            resolved = resolve_change_request(body)
        except CommandError as error:
            raise ApiError.of(error) from None
        return await state.gateway.submit(
            request,
            client,
            ChangeSubscriptionPlan,
            {
                "org_id": org_id,
                "billing_account_id": billing_id,
                "subscription_id": id,
                **resolved.command_fields(),
            },
            _phase,
            field_names={
                "billing_account_id": "billing_id",
                "subscription_id": "id",
                **resolved.field_names(),
            },
            headers=DEPRECATED_FIELDS_USED if resolved.used_deprecated_fields else None,
        )

    @app.get("/v1beta1/commands/{id}", summary="A command's status, result or error")
    async def get_command(id: PathId, client: Client, state: State) -> JSONResponse:
        record = await to_thread.run_sync(state.svc.commands.get, id)
        if record is None or record.client_id != client:
            raise ApiError(ErrorCode.NOT_FOUND, f"command {id!r} not found")
        return JSONResponse(record_view(record))

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", include_in_schema=False)
    async def readyz(state: State) -> JSONResponse:
        if state.ready_until > time.monotonic():
            return JSONResponse({"status": "ready"})
        checks = await to_thread.run_sync(_readiness, state)
        ready = all(value == "ok" for value in checks.values())
        if ready:
            state.ready_until = time.monotonic() + 5.0
        return JSONResponse(
            {"status": "ready" if ready else "not ready", "checks": checks},
            status_code=200 if ready else 503,
        )

    return app


class ThrottledSources:
    """A source over its failed-authentication limit is answered 429 here, before routing
    and validation, unless it brings credentials verified within the cache window: a flood
    from one address then costs the API next to nothing."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        state: ApiState | None = getattr(scope["app"].state, "api", None)
        client = scope.get("client")
        if scope["type"] == "http" and state is not None and client:
            refusal = throttled(((state.failures_by_source, client[0]),))
            if refusal is not None and not self._verified(state, scope):
                await state.refusal_hold.hold()
                response = JSONResponse(
                    body_of(refusal.code, refusal.message, refusal.details),
                    status_code=429,
                    headers=refusal.headers,
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)

    @staticmethod
    def _verified(state: ApiState, scope: Scope) -> bool:
        header = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1")
        credentials = basic_credentials(header)
        return credentials is not None and state.authenticator.cached(*credentials)


class BodySizeLimit:
    """Refuse a declared ``Content-Length`` over the cap before anything else runs (before
    authentication's slow hash, before a byte of the body is read)."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            for name, value in scope["headers"]:
                if name == b"content-length" and value.isdigit() and int(value) > self.limit:
                    error = _too_large()
                    response = JSONResponse(
                        body_of(error.code, error.message),
                        status_code=413,
                        headers={"Connection": "close"},
                    )
                    await response(scope, receive, send)
                    return
        await self.app(scope, receive, send)


def _readiness(state: ApiState) -> dict[str, str]:
    checks: dict[str, str] = {}
    try:
        with get_engine().connect() as connection:
            connection.execute(text("SELECT 1"))
        checks["database"] = "ok"
    except Exception as error:
        checks["database"] = f"error: {type(error).__name__}"
    celery = state.gateway.celery
    try:
        with celery.connection_for_write() as connection:
            connection.ensure_connection(max_retries=1, timeout=1)
        checks["redis"] = "ok"
    except Exception as error:
        checks["redis"] = f"error: {type(error).__name__}"
    try:
        replies = celery.control.ping(timeout=1.0)
        checks["worker"] = "ok" if replies else "no worker answered"
    except Exception as error:
        checks["worker"] = f"error: {type(error).__name__}"
    return checks


def asgi_app() -> FastAPI:
    """Factory for ``uvicorn --factory worker.api.app:asgi_app``."""
    return create_app()
