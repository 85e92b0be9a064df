"""The hosted invoice page (``hosted_invoice_url``), where a customer sees an invoice and, when
their card needs it, authenticates its payment (:mod:`stripe_emulator.cards`).

``GET /_emulator/hosted_invoices/{id}`` is a small HTML page: the invoice's number, amount due
and status, and for an open invoice two buttons, "Authenticate and pay" and "Fail
authentication". They post to ``POST /_emulator/hosted_invoices/{id}/authenticate``, which
takes a form (``outcome=succeed|fail``, answered with the page again) or JSON (``{"succeed":
true|false}``, answered ``{"invoice", "status"}``). Stripe's own page cannot be driven by an
API; tests and the local stack's users drive this one.
"""

from __future__ import annotations

import html
from typing import Any
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from stripe_emulator import cards
from stripe_emulator.currencies import format_amount
from stripe_emulator.emulator import Emulator
from stripe_emulator.payments import HOSTED_INVOICES_PATH

FORM = "application/x-www-form-urlencoded"


def routes(emulator: Emulator) -> list[Route]:
    async def page(request: Request) -> Response:  # on the loop, as every store access
        invoice = emulator.store.invoices.get(request.path_params["invoice_id"])
        if invoice is None or invoice["status"] == "draft":
            return HTMLResponse("<h1>No such invoice</h1>", status_code=404)
        return HTMLResponse(_render(invoice))

    async def authenticate(request: Request) -> Response:
        invoice_id = request.path_params["invoice_id"]
        form = request.headers.get("content-type", "").startswith(FORM)
        succeed = await _outcome(request, form)
        if succeed is None:
            return _error("`succeed` must be true or false (a form: `outcome=succeed|fail`)", 400)
        now = emulator.tick()
        invoice = emulator.store.invoices.get(invoice_id)
        if invoice is None:
            return _error(f"no invoice {invoice_id}", 404)
        if invoice["status"] != "open":
            return _error(f"invoice {invoice_id} is {invoice['status']}, not open", 400)
        events = emulator.store.events
        events.begin(now)  # what paying changes is recorded (with no API request)
        try:
            cards.authenticate(emulator.store, invoice, now, succeed=succeed)
        finally:
            events.end()
        if form:
            return RedirectResponse(f"{HOSTED_INVOICES_PATH}{invoice_id}", status_code=303)
        return JSONResponse({"invoice": invoice_id, "status": invoice["status"]})

    return [
        Route(HOSTED_INVOICES_PATH + "{invoice_id}", page, methods=["GET"]),
        Route(HOSTED_INVOICES_PATH + "{invoice_id}/authenticate", authenticate, methods=["POST"]),
    ]


async def _outcome(request: Request, form: bool) -> bool | None:
    if form:  # parsed here: Starlette's form parser needs python-multipart
        fields = parse_qs((await request.body()).decode("latin-1"))
        outcome = (fields.get("outcome") or [""])[0]
        return {"succeed": True, "fail": False}.get(outcome)
    try:
        body: Any = await request.json()
    except ValueError:
        return None
    succeed = body.get("succeed") if isinstance(body, dict) else None
    return succeed if isinstance(succeed, bool) else None


def _error(message: str, status: int) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _render(invoice: dict[str, Any]) -> str:
    number = html.escape(str(invoice["number"]))
    due = html.escape(format_amount(str(invoice["currency"]), int(invoice["amount_remaining"])))
    status = html.escape(str(invoice["status"]))
    actions = ""
    if invoice["status"] == "open":
        target = html.escape(f"{HOSTED_INVOICES_PATH}{invoice['id']}/authenticate")
        actions = (
            f'<form method="post" action="{target}">'
            '<button name="outcome" value="succeed">Authenticate and pay</button> '
            '<button name="outcome" value="fail">Fail authentication</button></form>'
        )
    return (
        f"<!doctype html><title>Invoice {number}</title>"
        f"<h1>Invoice {number}</h1>"
        f"<p>Amount due: {due}</p>"
        f"<p>Status: <strong>{status}</strong></p>{actions}"
    )
