"""ASGI middlewares that refuse a request before routing: the cheapest refusals first."""

from __future__ import annotations

from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from worker.api.auth import basic_credentials, throttled
from worker.api.body import too_large
from worker.api.errors import body_of
from worker.api.state import ApiState


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
        return credentials is not None and state.authenticator.cached(*credentials) is not None


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
