"""Credit notes of finalized invoices (what they do: :mod:`stripe_emulator.credit_notes`).

Routes: ``POST /v1/credit_notes``, ``GET /v1/credit_notes`` (filters ``invoice``,
``customer``, ``created``; newest first), ``GET /v1/credit_notes/preview`` and
``GET /v1/credit_notes/preview/lines`` (the note a creation would make, making nothing),
``GET/POST /v1/credit_notes/{id}`` (``memo``, ``metadata``), ``GET /v1/credit_notes/{id}/lines``,
``POST /v1/credit_notes/{id}/void``.

Not emulated (``parameter_unknown``): ``refunds`` (linking existing refunds), ``shipping_cost``,
lines' ``tax_amounts``, ``tax_rates`` and ``unit_amount_decimal``. A preview has a fresh
``cn_...`` id and number each time, as the note made next would have; ``email_type`` is
accepted and sends nothing.
"""

from __future__ import annotations

from typing import Any

from stripe_emulator import credit_notes
from stripe_emulator.credit_notes import render
from stripe_emulator.params import PAGINATION, Arr, Enum, Int, Metadata, Obj, Range, Str, schema
from stripe_emulator.resources.common import (
    Ctx,
    Endpoint,
    created_matches,
    lookup,
    metadata_for_update,
    newest_first,
    paginate,
)
from stripe_emulator.state import Record

REASONS = ("duplicate", "fraudulent", "order_change", "product_unsatisfactory")

FIELDS = {
    "amount": Int(),
    "credit_amount": Int(),
    "effective_at": Int(),
    "email_type": Enum("credit_note", "none"),
    "invoice": Str(required=True),
    "lines": Arr(
        Obj(
            {
                "amount": Int(),
                "description": Str(),
                "invoice_line_item": Str(),
                "metadata": Metadata(),
                "quantity": Int(),
                "type": Enum("custom_line_item", "invoice_line_item", required=True),
                "unit_amount": Int(),
            }
        )
    ),
    "memo": Str(),
    "metadata": Metadata(),
    "out_of_band_amount": Int(),
    "reason": Enum(*REASONS),
    "refund_amount": Int(),
}
CREATE = schema(FIELDS)
PREVIEW = schema(FIELDS)
PREVIEW_LINES = schema({**FIELDS, **PAGINATION})
LIST = schema({"created": Range(), "customer": Str(), "invoice": Str(), **PAGINATION})
RETRIEVE = schema({})
UPDATE = schema({"memo": Str(), "metadata": Metadata()})
VOID = schema({})
LINES = schema(dict(PAGINATION))

_NOTE_FIELDS = frozenset(FIELDS)


def _note(ctx: Ctx) -> Record:
    return lookup(ctx.store.credit_notes, ctx.path["id"], "credit_note")


def _built(ctx: Ctx, params: dict[str, Any]) -> Record:
    invoice = lookup(ctx.store.invoices, params["invoice"], "invoice", "invoice")
    fields = {name: value for name, value in params.items() if name in _NOTE_FIELDS}
    return credit_notes.build(ctx.store, invoice, fields, ctx.now)


def create(ctx: Ctx, params: dict[str, Any]) -> Record:
    note = _built(ctx, params)
    credit_notes.issue(ctx.store, note, ctx.now)
    return render(note)


def preview(ctx: Ctx, params: dict[str, Any]) -> Record:
    return render(_built(ctx, params))


def preview_lines(ctx: Ctx, params: dict[str, Any]) -> Record:
    note = _built(ctx, params)
    return paginate(
        note["lines"]["data"], params, "/v1/credit_notes/preview/lines", "credit note line item"
    )


def retrieve(ctx: Ctx, params: dict[str, Any]) -> Record:
    return render(_note(ctx))


def update(ctx: Ctx, params: dict[str, Any]) -> Record:
    note = _note(ctx)
    store = ctx.store
    store.events.watch(note["id"], "credit_note", lambda: credit_notes.snapshot(note))
    if "memo" in params:
        note["memo"] = params["memo"]
    if "metadata" in params:
        note["metadata"] = metadata_for_update(note["metadata"], params["metadata"])
    return render(note)


def void(ctx: Ctx, params: dict[str, Any]) -> Record:
    note = _note(ctx)
    credit_notes.void(ctx.store, note, ctx.now)
    return render(note)


def list_(ctx: Ctx, params: dict[str, Any]) -> Record:
    store = ctx.store
    invoice_id = params.get("invoice")
    customer_id = params.get("customer")
    if invoice_id is not None:
        ids = store.credit_notes_of.get(invoice_id, [])
        candidates = [store.credit_notes[note_id] for note_id in reversed(ids)]
    else:
        candidates = newest_first(store.credit_notes)
    records = [
        note
        for note in candidates
        if (customer_id is None or note["customer"] == customer_id)
        and created_matches(note["created"], params.get("created"))
    ]
    return paginate(records, params, "/v1/credit_notes", "credit_note", render)


def lines(ctx: Ctx, params: dict[str, Any]) -> Record:
    note = _note(ctx)
    return paginate(
        note["lines"]["data"],
        params,
        f"/v1/credit_notes/{note['id']}/lines",
        "credit note line item",
    )


ROUTES = (
    Endpoint("POST", "/v1/credit_notes", CREATE, create, "credit_note"),
    Endpoint("GET", "/v1/credit_notes", LIST, list_, "list<credit_note>"),
    Endpoint("GET", "/v1/credit_notes/preview", PREVIEW, preview, "credit_note"),
    Endpoint(
        "GET",
        "/v1/credit_notes/preview/lines",
        PREVIEW_LINES,
        preview_lines,
        "list<credit_note_line_item>",
    ),
    Endpoint("GET", "/v1/credit_notes/{id}", RETRIEVE, retrieve, "credit_note"),
    Endpoint("POST", "/v1/credit_notes/{id}", UPDATE, update, "credit_note"),
    Endpoint("GET", "/v1/credit_notes/{id}/lines", LINES, lines, "list<credit_note_line_item>"),
    Endpoint("POST", "/v1/credit_notes/{id}/void", VOID, void, "credit_note"),
)
