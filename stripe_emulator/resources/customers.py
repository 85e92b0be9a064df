"""Customers and their tax IDs.

Routes: ``POST/GET /v1/customers``, ``GET /v1/customers/search``,
``GET/POST/DELETE /v1/customers/{customer}``, ``POST/GET /v1/customers/{customer}/tax_ids``,
``GET/DELETE /v1/customers/{customer}/tax_ids/{id}``.

As on Stripe: retrieving a deleted customer answers the ``{"deleted": true}`` stub (200), any
other operation on it is a 404; deleting a customer cancels its subscriptions (dropping their
pending updates) and deletes its tax IDs; its invoices stay.
"""

from __future__ import annotations

import re
from typing import Any

from stripe_emulator import objects, payments, recorder, search, taxids
from stripe_emulator.errors import invalid
from stripe_emulator.ids import invoice_prefix, new_id
from stripe_emulator.objects import ADDRESS_FIELDS
from stripe_emulator.params import (
    PAGINATION,
    UNSET,
    Arr,
    Enum,
    Field,
    Int,
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
    metadata_for_create,
    metadata_for_update,
    newest_first,
    paginate,
    paginate_in_order,
)
from stripe_emulator.state import Record, Store

_ADDRESS = {name: Str() for name in ADDRESS_FIELDS}
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+\Z")


def _customer_fields(*, creating: bool) -> dict[str, Field]:
    fields: dict[str, Field] = {
        "address": Obj(_ADDRESS, emptyable=True),
        "balance": Int(),
        "description": Str(),
        "email": Str(max_length=512),
        "invoice_prefix": Str(max_length=12),
        "metadata": Metadata(),
        "name": Str(),
        "next_invoice_sequence": Int(minimum=1),
        "phone": Str(),
        "preferred_locales": Arr(Str()),
        "shipping": Obj(
            {
                "address": Obj(_ADDRESS, required=True),
                "name": Str(required=True),
                "phone": Str(),
            },
            emptyable=True,
        ),
        "tax_exempt": Enum("exempt", "none", "reverse", emptyable=True),
    }
    if creating:
        fields["tax_id_data"] = Arr(
            Obj({"type": Enum(*taxids.TAX_ID_TYPES, required=True), "value": Str(required=True)}),
        )
    return fields


CREATE = schema(_customer_fields(creating=True))
UPDATE = schema(_customer_fields(creating=False))
RETRIEVE = schema({})
DELETE = schema({}, expandable=False)
LIST = schema({"email": Str(max_length=512), "created": Range(), **PAGINATION})
SEARCH = schema({"query": Str(required=True), "limit": PAGINATION["limit"], "page": Str()})
TAX_ID_CREATE = schema(
    {"type": Enum(*taxids.TAX_ID_TYPES, required=True), "value": Str(required=True)}
)
TAX_ID_LIST = schema(dict(PAGINATION))


def _normalise(params: dict[str, Any]) -> dict[str, Any]:
    """Typed parameters -> stored field values (unset markers become Stripe's defaults)."""
    fields = dict(params)
    if "email" in fields and not _EMAIL.match(fields["email"]):
        raise invalid(f"Invalid email address: {fields['email']}", "email", "email_invalid")
    if "address" in fields:
        fields["address"] = (
            None if fields["address"] is UNSET else objects.address(fields["address"])
        )
    if "shipping" in fields:
        shipping = fields["shipping"]
        fields["shipping"] = (
            None
            if shipping is UNSET
            else {
                "address": objects.address(shipping["address"]),
                "name": shipping["name"],
                "phone": shipping.get("phone"),
            }
        )
    if fields.get("tax_exempt") is UNSET:
        fields["tax_exempt"] = "none"
    return fields


def _check_tax_id(tax_type: str, value: str, param: str) -> None:
    if not taxids.is_valid(tax_type, value):
        raise invalid(f"Invalid value for {tax_type}.", param, "tax_id_invalid")


def _add_tax_id(store: Store, now: int, customer_id: str, tax_type: str, value: str) -> Record:
    record = objects.tax_id(
        new_id("txi"),
        now,
        customer_id,
        tax_type,
        value,
        taxids.country_of(tax_type, value),
        taxids.verification_for(tax_type),
    )
    store.tax_ids[record["id"]] = record
    store.customer_tax_ids.setdefault(customer_id, []).append(record["id"])
    recorder.tax_id(store, "customer.tax_id.created", record)
    return record


def live_customer(store: Store, customer_id: str, param: str = "id") -> Record:
    """A customer that exists and is not deleted (deleted ones are 404s for writes)."""
    return lookup(store.customers, customer_id, "customer", param)


def create(ctx: Ctx, params: dict[str, Any]) -> Record:
    fields = _normalise(params)
    tax_id_data: list[dict[str, str]] = fields.pop("tax_id_data", [])
    # Validate every tax id before creating anything: the request must not half-succeed.
    for index, datum in enumerate(tax_id_data):
        _check_tax_id(datum["type"], datum["value"], f"tax_id_data[{index}][value]")
    fields["metadata"] = metadata_for_create(fields.get("metadata"))
    customer_id = new_id("cus")
    record = objects.customer(customer_id, ctx.now, fields, invoice_prefix())
    ctx.store.add_customer(record)
    recorder.customer(ctx.store, record, created=True)
    for datum in tax_id_data:
        _add_tax_id(ctx.store, ctx.now, customer_id, datum["type"], datum["value"])
    return record


def retrieve(ctx: Ctx, params: dict[str, Any]) -> Record:
    customer_id = ctx.path["customer"]
    if customer_id in ctx.store.deleted_customers:
        return objects.deleted(customer_id, "customer")
    return live_customer(ctx.store, customer_id)


def update(ctx: Ctx, params: dict[str, Any]) -> Record:
    record = live_customer(ctx.store, ctx.path["customer"])
    fields = _normalise(params)
    if "metadata" in fields:
        fields["metadata"] = metadata_for_update(record["metadata"], fields["metadata"])
    fields.pop("expand", None)
    recorder.customer(ctx.store, record)
    record.update(fields)
    return record


def delete(ctx: Ctx, params: dict[str, Any]) -> Record:
    store = ctx.store
    customer_id = ctx.path["customer"]
    record = live_customer(store, customer_id)
    for subscription in store.subscriptions.values():
        if subscription["customer"] == customer_id and subscription["status"] != "canceled":
            recorder.subscription(store, subscription)
            payments.end_subscription(store, subscription, ctx.now, "cancellation_requested")
            subscription["cancel_at"] = None
    for tax_id_id in store.customer_tax_ids.pop(customer_id, []):
        store.tax_ids.pop(tax_id_id, None)
    recorder.deleted(store, "customer.deleted", record)
    store.remove_customer(customer_id)
    store.deleted_customers.add(customer_id)
    return objects.deleted(customer_id, "customer")


def list_(ctx: Ctx, params: dict[str, Any]) -> Record:
    email = params.get("email")
    created = params.get("created")
    if email is None and created is None:
        return paginate_in_order(
            ctx.store.customers, ctx.store.customer_order, params, "/v1/customers", "customer"
        )
    records = [
        record
        for record in newest_first(ctx.store.customers)
        if (email is None or record["email"] == email)  # Stripe: case-sensitive, exact
        and created_matches(record["created"], created)
    ]
    return paginate(records, params, "/v1/customers", "customer")


def search_(ctx: Ctx, params: dict[str, Any]) -> Record:
    query = search.parse(params["query"], search.CUSTOMER_FIELDS, "customers")
    matches = search.matcher(query)
    records = [record for record in newest_first(ctx.store.customers) if matches(record)]
    return search.result(records, params, "/v1/customers/search")


def create_tax_id(ctx: Ctx, params: dict[str, Any]) -> Record:
    customer_id = ctx.path["customer"]
    live_customer(ctx.store, customer_id)
    _check_tax_id(params["type"], params["value"], "value")
    return _add_tax_id(ctx.store, ctx.now, customer_id, params["type"], params["value"])


def _customer_tax_id(ctx: Ctx) -> Record:
    customer_id = ctx.path["customer"]
    live_customer(ctx.store, customer_id)
    tax_id_id = ctx.path["id"]
    record = ctx.store.tax_ids.get(tax_id_id)
    if record is None or record["customer"] != customer_id:
        return lookup({}, tax_id_id, "tax ID")
    return record


def retrieve_tax_id(ctx: Ctx, params: dict[str, Any]) -> Record:
    return _customer_tax_id(ctx)


def delete_tax_id(ctx: Ctx, params: dict[str, Any]) -> Record:
    record = _customer_tax_id(ctx)
    del ctx.store.tax_ids[record["id"]]
    ctx.store.customer_tax_ids[record["customer"]].remove(record["id"])
    recorder.tax_id(ctx.store, "customer.tax_id.deleted", record)
    return objects.deleted(record["id"], "tax_id")


def list_tax_ids(ctx: Ctx, params: dict[str, Any]) -> Record:
    customer_id = ctx.path["customer"]
    live_customer(ctx.store, customer_id)
    return paginate(
        tax_ids_of(ctx.store, customer_id),
        params,
        f"/v1/customers/{customer_id}/tax_ids",
        "tax ID",
    )


def tax_ids_of(store: Store, customer_id: str) -> list[Record]:
    ids = store.customer_tax_ids.get(customer_id, [])
    return [store.tax_ids[tax_id_id] for tax_id_id in reversed(ids)]


ROUTES = (
    Endpoint("POST", "/v1/customers", CREATE, create, "customer"),
    Endpoint("GET", "/v1/customers", LIST, list_, "list<customer>"),
    Endpoint("GET", "/v1/customers/search", SEARCH, search_, "search<customer>"),
    Endpoint("GET", "/v1/customers/{customer}", RETRIEVE, retrieve, "customer"),
    Endpoint("POST", "/v1/customers/{customer}", UPDATE, update, "customer"),
    Endpoint("DELETE", "/v1/customers/{customer}", DELETE, delete, "deleted"),
    Endpoint("POST", "/v1/customers/{customer}/tax_ids", TAX_ID_CREATE, create_tax_id, "tax_id"),
    Endpoint("GET", "/v1/customers/{customer}/tax_ids", TAX_ID_LIST, list_tax_ids, "list<tax_id>"),
    Endpoint("GET", "/v1/customers/{customer}/tax_ids/{id}", RETRIEVE, retrieve_tax_id, "tax_id"),
    Endpoint(
        "DELETE",
        "/v1/customers/{customer}/tax_ids/{id}",
        DELETE,
        delete_tax_id,
        "deleted",
    ),
)
