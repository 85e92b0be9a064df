"""Who may see the console, and do what in it: the API's own clients and rules.

A browser sends the client's id and secret as HTTP Basic credentials (it asks for them once,
at the ``WWW-Authenticate`` challenge) and they are verified by the API's authentication
(``worker/api/auth.py``), with its cache and throttles. Viewing needs ``operations:read``,
an action ``operations:write`` (``domain/permissions.py``). Those scopes span every
organization, so a client limited to organizations is refused the console outright, as it is
refused ``/v1beta1/operations``: it sees no organization's data at all, its own included.

A refusal is a page, not the API's JSON error: :func:`install_refusal_pages` answers
:class:`ConsoleRefusal` with one, and a miss (404) or a wrong method (405) under ``/console``
too.
"""

from __future__ import annotations

import inspect
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import Response
from starlette.exceptions import HTTPException

from domain.errors import CommandError
from domain.permissions import Scope
from worker.api.auth import Caller, authenticated_client
from worker.api.console.layout import PREFIX, is_console_path, message_page
from worker.api.console.responses import allowed_methods
from worker.api.errors import ApiError
from worker.api.state import api_state


class ConsoleRefusal(Exception):
    """A console request refused: its status, what to tell, the headers to send (the Basic
    challenge for a 401, ``Retry-After`` for a 429)."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


TITLES = {
    401: "Sign in",
    403: "Not allowed",
    404: "Not found",
    405: "Not allowed",
    429: "Too many attempts",
}
MISSES = {
    404: f"There is no console page at this address: the console starts at {PREFIX}.",
    405: "This console page does not take that method.",
}
"""What the console's page says of a miss (nothing of the request is echoed)."""


async def _caller(request: Request, scope: Scope) -> Caller:
    try:
        caller = await authenticated_client(request, api_state(request))
    except ApiError as refused:
        raise ConsoleRefusal(refused.status, refused.message, refused.headers) from None
    try:
        caller.grant.check(scope, request.path_params.get("org_id"))
    except CommandError as refused:
        raise ConsoleRefusal(403, refused.message) from None
    return caller


async def viewer(request: Request) -> Caller:
    """The client of the request's Basic credentials, if it holds ``operations:read``."""
    return await _caller(request, Scope.OPERATIONS_READ)


async def operator(request: Request) -> Caller:
    """The client of the request's Basic credentials, if it holds ``operations:write``."""
    return await _caller(request, Scope.OPERATIONS_WRITE)


Viewer = Annotated[Caller, Depends(viewer)]
Operator = Annotated[Caller, Depends(operator)]


def may_see(caller: Caller, org_id: str) -> bool:
    """Whether ``caller`` may see ``org_id``'s data (by the grant's rules, as a page whose
    path does not name the organization learns it only after reading)."""
    try:
        caller.grant.check(Scope.OPERATIONS_READ, org_id)
    except CommandError:
        return False
    return True


def install_refusal_pages(app: FastAPI) -> None:
    """Answer a :class:`ConsoleRefusal` with a page of its status, and an HTTP error of the
    router (a miss, a wrong method) under ``/console`` with a page too; elsewhere the API's
    handler of those errors (installed before, ``worker/api/errors.py``) answers as before."""

    async def refusal_page(request: Request, refused: Any) -> Response:
        assert isinstance(refused, ConsoleRefusal)
        title = TITLES.get(refused.status, "Refused")
        return message_page(title, refused.message, status=refused.status, headers=refused.headers)

    api_answer = app.exception_handlers.get(HTTPException, http_exception_handler)

    async def miss_page(request: Request, error: Any) -> Response:
        assert isinstance(error, HTTPException)
        if not is_console_path(request.url.path):
            answered = api_answer(request, error)
            return await answered if inspect.isawaitable(answered) else answered
        status = error.status_code
        headers = dict(error.headers or {})
        if status == 405:  # every method the address takes (the router names its first route's)
            headers["Allow"] = ", ".join(allowed_methods(request.scope))
        message = MISSES.get(status, str(error.detail))
        return message_page(TITLES.get(status, "Refused"), message, status=status, headers=headers)

    app.add_exception_handler(ConsoleRefusal, refusal_page)
    app.add_exception_handler(HTTPException, miss_page)
