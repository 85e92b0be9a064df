"""ASGI middlewares that refuse a request before routing: the cheapest refusals first."""

from __future__ import annotations

import time

from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from adapters.observability import metrics
from worker.api.auth import basic_credentials, throttled
from worker.api.body import too_large
from worker.api.errors import body_of
from worker.api.state import ApiState


class ThrottledSources:
    """A source over its failed-authentication limit is answered 429 here, before routing
    and validation, unless it brings credentials verified within the cache window: a flood
    from one address then costs the API next to nothing. Requests without credentials are
    not checked (probes, scrapes, Stripe's deliveries: they cost no hash and ask nothing of
    Redis, where the failures are counted)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        state: ApiState | None = getattr(scope["app"].state, "api", None)
        client = scope.get("client")
        # Verified credentials first: they cost no round trip to Redis.
        if (
            scope["type"] == "http"
            and state is not None
            and client
            and self._unverified(state, scope)
        ):
            refusal = await throttled(((state.failures_by_source, client[0]),))
            if refusal is not None:
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
    def _unverified(state: ApiState, scope: Scope) -> bool:
        """Whether the request brings credentials, and none verified within the window."""
        header = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1")
        if not header:
            return False
        credentials = basic_credentials(header)
        if credentials is None:
            return True
        # Being refreshed counts as verified: the request waits for the refresh's answer.
        authenticator = state.authenticator
        return authenticator.cached(*credentials) is None and (
            authenticator.refreshing(*credentials) is None
        )


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
                    error = too_large()
                    response = JSONResponse(
                        body_of(error.code, error.message),
                        status_code=413,
                        headers={"Connection": "close"},
                    )
                    await response(scope, receive, send)
                    return
        await self.app(scope, receive, send)


KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class HttpMetrics:
    """Counts and times every answer by route template (``/v1beta1/users/{id}/enable``, never
    the raw path, so that ids make no new series), method and status. Outermost, so that the
    refusals made before routing count too; a request no route matched is ``unmatched``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # an exception escaping the app is answered 500 outside it

        async def send_and_remember(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_and_remember)
        finally:
            # Routing writes the matched route into the scope it was handed (this one).
            route = getattr(scope.get("route"), "path_format", None) or "unmatched"
            method = str(scope.get("method", ""))
            if method not in KNOWN_METHODS:  # any token is a method to h11: bound the series
                method = "other"
            metrics.HTTP_REQUESTS.labels(route, method, str(status)).inc()
            metrics.HTTP_REQUEST_SECONDS.labels(route, method).observe(
                time.perf_counter() - started
            )
