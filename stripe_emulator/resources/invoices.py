"""Invoices and invoice items, as subscriptions make them (no manual invoices).

Routes: ``GET /v1/invoices`` (filters ``customer``, ``subscription``, ``status``,
``collection_method``, ``created``; newest first), ``GET /v1/invoices/{id}``,
``GET /v1/invoices/{id}/lines``, ``POST /v1/invoices/{id}/pay`` (``paid_out_of_band``, a test card
``payment_method``: :mod:`stripe_emulator.cards`),
``POST /v1/invoices/create_preview``, ``GET /v1/invoiceitems`` (``customer``, ``invoice``,
``pending``), ``GET /v1/invoiceitems/{id}``.

An invoice embeds its first 10 lines (``lines.has_more`` beyond); ``/lines`` pages through all.

``create_preview`` answers, without changing anything, the invoice an existing subscription's
change would produce now: with ``subscription_details[proration_behavior]=always_invoice`` (or a
change that restarts the cycle or ends a trial) the invoice the update would make at once, its
proration lines computed at ``subscription_details[proration_date]`` exactly as the update made
with that ``proration_date`` computes them; otherwise the upcoming renewal's invoice, with the
pending invoice items, the new proration lines and the next period at the new prices. Like
Stripe's previews its ``id`` is ``upcoming_in_...``, its lines' ``il_tmp_...``, its status
``draft``, and it is not listed. Previewing a new subscription (no ``subscription``) is not
emulated.
"""

from __future__ import annotations

from typing import Any

from stripe_emulator import cards, changes, payments, recorder
from stripe_emulator.errors import invalid
from stripe_emulator.objects import render_invoice as render
from stripe_emulator.params import (
    PAGINATION,
    Arr,
    Bool,
    Enum,
    Int,
    IntOr,
    Metadata,
    Obj,
    Range,
    Str,
    schema,
)
from stripe_emulator.resources.common import (
    Ctx,
    Endpoint,
    created_matches,
    lookup,
    newest_first,
    paginate,
)
from stripe_emulator.resources.customers import live_customer
from stripe_emulator.resources.subscriptions import MAX_ITEMS, PRORATION
from stripe_emulator.state import Record

STATUSES = ("draft", "open", "paid", "uncollectible", "void")

LIST = schema(
    {
        "collection_method": Enum("charge_automatically", "send_invoice"),
        "created": Range(),
        "customer": Str(),
        "status": Enum(*STATUSES),
        "subscription": Str(),
        **PAGINATION,
    }
)
RETRIEVE = schema({})
LINES = schema(dict(PAGINATION))
PAY = schema({"paid_out_of_band": Bool(), "payment_method": Str()})
PREVIEW = schema(
    {
        "customer": Str(),
        "subscription": Str(),
        "subscription_details": Obj(
            {
                "billing_cycle_anchor": Obj(
                    {
                        "timestamp": Int(),
                        "type": Enum("now", "timestamp", "unchanged", required=True),
                    }
                ),
                "items": Arr(
                    Obj(
                        {
                            "deleted": Bool(),
                            "id": Str(),
                            "metadata": Metadata(),
                            "price": Str(),
                            "quantity": Int(minimum=0),
                        }
                    ),
                    max_items=MAX_ITEMS,
                ),
                "proration_behavior": PRORATION,
                "proration_date": Int(),
                "trial_end": IntOr("now"),
            }
        ),
    }
)
ITEM_LIST = schema(
    {"created": Range(), "customer": Str(), "invoice": Str(), "pending": Bool(), **PAGINATION}
)


def _invoice(ctx: Ctx) -> Record:
    return lookup(ctx.store.invoices, ctx.path["id"], "invoice")


def retrieve(ctx: Ctx, params: dict[str, Any]) -> Record:
    return render(_invoice(ctx))


def list_(ctx: Ctx, params: dict[str, Any]) -> Record:
    store = ctx.store
    subscription_id = params.get("subscription")
    if subscription_id is not None:
        ids = store.invoices_of.get(subscription_id, [])
        candidates = [store.invoices[invoice_id] for invoice_id in reversed(ids)]
    else:
        candidates = newest_first(store.invoices)
    wanted = {
        name: params[name] for name in ("customer", "status", "collection_method") if name in params
    }
    created = params.get("created")
    if not wanted and created is None:
        records = candidates
    else:
        records = [
            invoice
            for invoice in candidates
            if all(invoice[field] == value for field, value in wanted.items())
            and created_matches(invoice["created"], created)
        ]
    return paginate(records, params, "/v1/invoices", "invoice", render)


def lines(ctx: Ctx, params: dict[str, Any]) -> Record:
    invoice = _invoice(ctx)
    return paginate(
        invoice["lines"]["data"], params, f"/v1/invoices/{invoice['id']}/lines", "line item"
    )


def pay(ctx: Ctx, params: dict[str, Any]) -> Record:
    invoice = _invoice(ctx)
    if invoice["status"] == "paid":
        raise invalid("Invoice is already paid", code="invoice_already_paid")
    if invoice["status"] != "open":
        raise invalid(f"You can only pay an open invoice; this one is {invoice['status']}.")
    recorder.subscription(ctx.store, payments.subscription_of(ctx.store, invoice))
    if params.get("paid_out_of_band"):
        payments.mark_paid(ctx.store, invoice, ctx.now, out_of_band=True)
    else:
        cards.pay(ctx.store, invoice, ctx.now, params.get("payment_method"))
    return render(invoice)


def create_preview(ctx: Ctx, params: dict[str, Any]) -> Record:
    store, now = ctx.store, ctx.now
    if "subscription" not in params:
        raise invalid(
            "Missing required param: subscription. (The emulator previews changes of existing "
            "subscriptions only.)",
            "subscription",
            "parameter_missing",
        )
    subscription = lookup(
        store.subscriptions, params["subscription"], "subscription", "subscription"
    )
    if "customer" in params:
        customer = live_customer(store, params["customer"], "customer")
        if subscription["customer"] != customer["id"]:
            raise invalid(
                f"The subscription {subscription['id']} does not belong to customer "
                f"{customer['id']}.",
                "subscription",
            )
    if subscription["status"] in ("canceled", "incomplete_expired"):
        raise invalid(
            f"No upcoming invoices for customer: {subscription['customer']}",
            code="invoice_upcoming_none",
        )
    details: dict[str, Any] = params.get("subscription_details", {})
    if details.get("billing_cycle_anchor", {}).get("type") == "timestamp":
        raise invalid(
            "For an existing subscription, billing_cycle_anchor can only be now or unchanged.",
            "subscription_details[billing_cycle_anchor][type]",
        )
    plan = changes.plan(store, subscription, details, now, prefix="subscription_details")
    bill = changes.bill(store, subscription, plan, preview=True)
    draft = bill.invoice or changes.upcoming(store, subscription, plan, bill.prorations)
    return render(draft.invoice)


def list_items(ctx: Ctx, params: dict[str, Any]) -> Record:
    customer_id = params.get("customer")
    invoice_id = params.get("invoice")
    pending = params.get("pending")
    records = [
        item
        for item in newest_first(ctx.store.invoice_items)
        if (customer_id is None or item["customer"] == customer_id)
        and (invoice_id is None or item["invoice"] == invoice_id)
        and (pending is None or (item["invoice"] is None) == pending)
        and created_matches(item["date"], params.get("created"))
    ]
    return paginate(records, params, "/v1/invoiceitems", "invoice item")


def retrieve_item(ctx: Ctx, params: dict[str, Any]) -> Record:
    return lookup(ctx.store.invoice_items, ctx.path["id"], "invoiceitem")


ROUTES = (
    Endpoint("GET", "/v1/invoices", LIST, list_, "list<invoice>"),
    Endpoint("POST", "/v1/invoices/create_preview", PREVIEW, create_preview, "invoice"),
    Endpoint("GET", "/v1/invoices/{id}", RETRIEVE, retrieve, "invoice"),
    Endpoint("GET", "/v1/invoices/{id}/lines", LINES, lines, "list<line_item>"),
    Endpoint("POST", "/v1/invoices/{id}/pay", PAY, pay, "invoice"),
    Endpoint("GET", "/v1/invoiceitems", ITEM_LIST, list_items, "list<invoiceitem>"),
    Endpoint("GET", "/v1/invoiceitems/{id}", RETRIEVE, retrieve_item, "invoiceitem"),
)
