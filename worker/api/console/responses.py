"""What every response under ``/console`` holds to, whichever part of the API answers it
(a page, a redirect, the stylesheet, a refusal, a miss): the console's security headers,
``HEAD`` answered as ``GET`` without the body, and ``OPTIONS`` answered with the methods the
address takes. A miss or a wrong method under ``/console`` is answered by the console's own
page (:func:`worker.api.console.access.install_refusal_pages`), not the API's JSON.
"""

from __future__ import annotations

from starlette.datastructures import MutableHeaders
from starlette.responses import Response
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from worker.api.console.layout import SECURITY_HEADERS, is_console_path


class ConsoleResponses:
    """An ASGI middleware for the console's addresses (anything else passes untouched).

    - Every response gets each of :data:`SECURITY_HEADERS` it does not set itself (the
      stylesheet keeps its own ``Cache-Control``, a confirmation page its
      ``Referrer-Policy``): a redirect or a refusal made outside the pages is covered too.
    - ``HEAD`` runs the ``GET`` route and sends its headers only (FastAPI routes a ``GET``
      for ``GET`` alone, so a link checker's or a proxy's ``HEAD`` would be a 405).
    - ``OPTIONS`` on an address some route takes answers 204 with ``Allow``, and nothing for
      CORS: a cross-origin script's preflight finds no ``Access-Control-Allow-Origin``, so
      the browser sends it nothing further.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not is_console_path(scope["path"]):
            await self.app(scope, receive, send)
            return
        if scope["method"] == "OPTIONS":
            allowed = allowed_methods(scope)
            if allowed:
                headers = {**SECURITY_HEADERS, "Allow": ", ".join(allowed)}
                await Response(status_code=204, headers=headers)(scope, receive, send)
                return
        head = scope["method"] == "HEAD"
        if head:
            scope = {**scope, "method": "GET"}

        async def send_secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers.setdefault(name, value)
            elif message["type"] == "http.response.body" and head:
                message = {**message, "body": b""}
            await send(message)

        await self.app(scope, receive, send_secured)


PROBED_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
"""The methods ``OPTIONS`` asks the routes about (the console's routes take GET and POST)."""


def allowed_methods(scope: Scope) -> list[str]:
    """The methods the app's routes take at ``scope``'s path (``HEAD`` with ``GET``, and
    ``OPTIONS``), or none when no route takes the path. Each method is asked of the router
    as a request of it would be routed (nested routers included), not read from a route."""
    routes = scope["app"].router.routes
    methods = {
        method
        for method in PROBED_METHODS
        if any(route.matches({**scope, "method": method})[0] is Match.FULL for route in routes)
    }
    if not methods:
        return []
    if "GET" in methods:
        methods.add("HEAD")
    return sorted(methods | {"OPTIONS"})
