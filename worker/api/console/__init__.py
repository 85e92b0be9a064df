"""The operator's console in the browser, under ``/console``: pages over the CLI's use cases."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.responses import Response

from worker.api.console import (
    accounts,
    actions,
    audit,
    commands,
    failures,
    home,
    organizations,
    search,
    subscriptions,
)
from worker.api.console.access import install_refusal_pages
from worker.api.console.layout import STYLESHEET
from worker.api.console.responses import ConsoleResponses

STATIC = Path(__file__).parent / "static"

PAGE_ROUTERS = (
    *(home.router, search.router, organizations.router, accounts.router),
    *(subscriptions.router, commands.router),
    *(failures.router, actions.router),  # the failures and their actions
    audit.router,
)
"""Each page module's router; the console's other pages join this tuple."""


def _stylesheet_router() -> APIRouter:
    router = APIRouter(include_in_schema=False)
    css = (STATIC / "console.css").read_bytes()

    @router.get(STYLESHEET)
    async def stylesheet() -> Response:
        return Response(css, media_type="text/css", headers={"Cache-Control": "max-age=300"})

    return router


def console_router() -> APIRouter:
    """Every console page, under ``/console``, left out of the OpenAPI document (they are
    pages, not the API)."""
    router = APIRouter(include_in_schema=False)
    router.include_router(_stylesheet_router())
    for page_router in PAGE_ROUTERS:
        router.include_router(page_router)
    return router


def install_console(app: FastAPI) -> None:
    """Mount the console in ``app``: its pages, its refusals and misses answered as pages, and
    its security headers, ``HEAD`` and ``OPTIONS`` on every address under ``/console``
    (outermost, so that a refusal made before routing has its headers too)."""
    app.include_router(console_router())
    install_refusal_pages(app)
    app.add_middleware(ConsoleResponses)
