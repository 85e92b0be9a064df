"""``expand[]``: replace ids with objects, and add includable fields, along dotted paths.

The graph below says, per object type, which fields can be walked through or expanded:

* ``ref`` - an id that expands into the referenced object (``price.product``);
* ``refs`` - a list of ids that each expand (``subscription.discounts``);
* ``include`` - a field Stripe only sends when expanded (``customer.tax_ids``);
* ``embedded`` - an object already inline, which a path may walk through but not expand
  (``subscription.items`` is a list, so ``items.data.price.product`` works, ``items`` alone
  does not);
* ``null`` - an expandable reference the emulator never sets (always ``null``, expands to
  ``null`` as on Stripe);
* ``unsupported`` - expandable on Stripe but backed by objects the emulator does not serve
  (``default_tax_rates``): rejected with a 400 rather than silently left as an id.

Paths are checked before the request executes (so an invalid one fails like a validation error
and is not stored under an idempotency key) and applied to the response afterwards, copying
every dict it changes so stored records are never modified. As on Stripe, list responses
expand through ``data.`` and at most four levels of references are expanded.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from stripe_emulator.errors import StripeError, invalid
from stripe_emulator.objects import list_object, render_invoice, render_subscription
from stripe_emulator.state import Record, Store

Edge = tuple[str, str]

GRAPH: Final[dict[str, dict[str, Edge]]] = {
    "customer": {
        "default_source": ("null", ""),
        "test_clock": ("null", ""),
        "invoice_settings": ("embedded", "customer_invoice_settings"),
        "tax_ids": ("include", "list<tax_id>"),
        "subscriptions": ("include", "list<subscription>"),
        "cash_balance": ("unsupported", "cash balances"),
        "invoice_credit_balance": ("unsupported", "invoice credit balances"),
        "sources": ("unsupported", "payment sources"),
    },
    "customer_invoice_settings": {"default_payment_method": ("null", "")},
    "tax_id": {"customer": ("ref", "customer")},
    "product": {"default_price": ("ref", "price")},
    "price": {"product": ("ref", "product")},
    "plan": {"product": ("ref", "product")},
    "subscription": {
        "customer": ("ref", "customer"),
        "items": ("embedded", "list<subscription_item>"),
        "latest_invoice": ("ref", "invoice"),
        "default_payment_method": ("null", ""),
        "default_source": ("null", ""),
        "pending_setup_intent": ("null", ""),
        "schedule": ("ref", "subscription_schedule"),
        "test_clock": ("null", ""),
        "on_behalf_of": ("null", ""),
        "application": ("null", ""),
        "discounts": ("refs", "discount"),
        "default_tax_rates": ("unsupported", "tax rates"),
    },
    "subscription_item": {
        "price": ("embedded", "price"),
        "plan": ("embedded", "plan"),
        "discounts": ("refs", "discount"),
        "tax_rates": ("unsupported", "tax rates"),
    },
    "invoice": {
        "customer": ("ref", "customer"),
        "lines": ("embedded", "list<line_item>"),
        "parent": ("embedded", "invoice_parent"),
        "account_tax_ids": ("unsupported", "account tax IDs"),
        "application": ("null", ""),
        "default_payment_method": ("null", ""),
        "default_source": ("null", ""),
        "discounts": ("refs", "discount"),
        "latest_revision": ("null", ""),
        "on_behalf_of": ("null", ""),
        "payments": ("unsupported", "invoice payments"),
        "test_clock": ("null", ""),
    },
    "invoice_parent": {"subscription_details": ("embedded", "invoice_subscription_details")},
    "invoice_subscription_details": {"subscription": ("ref", "subscription")},
    "line_item": {
        "pricing": ("embedded", "line_item_pricing"),
        "discounts": ("refs", "discount"),
    },
    "line_item_pricing": {"price_details": ("embedded", "price_details")},
    "price_details": {"price": ("ref", "price")},
    "invoiceitem": {
        "customer": ("ref", "customer"),
        "invoice": ("ref", "invoice"),
        "pricing": ("embedded", "line_item_pricing"),
        "discounts": ("refs", "discount"),
        "tax_rates": ("unsupported", "tax rates"),
        "test_clock": ("null", ""),
    },
    "discount": {
        "customer": ("ref", "customer"),
        "source": ("embedded", "discount_source"),
        "checkout_session": ("null", ""),
        "promotion_code": ("null", ""),
    },
    "discount_source": {"coupon": ("ref", "coupon")},
    "coupon": {},
    "credit_note": {
        "customer": ("ref", "customer"),
        "invoice": ("ref", "invoice"),
        "lines": ("embedded", "list<credit_note_line_item>"),
        "customer_balance_transaction": ("unsupported", "customer balance transactions"),
    },
    "credit_note_line_item": {},
    "subscription_schedule": {
        "customer": ("ref", "customer"),
        "subscription": ("ref", "subscription"),
        "application": ("null", ""),
        "test_clock": ("null", ""),
    },
    "deleted": {},
}

MAX_DEPTH: Final = 4


def _list_item_type(type_name: str) -> str | None:
    for prefix in ("list<", "search<"):
        if type_name.startswith(prefix):
            return type_name[len(prefix) : -1]
    return None


def check(root_type: str, paths: Iterable[str]) -> None:
    """Raise Stripe's 400 for any path that cannot be expanded on ``root_type``."""
    for path in paths:
        _check_path(root_type, path)


def _check_path(root_type: str, path: str) -> None:
    segments = path.split(".")
    type_name = root_type
    depth = 0
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        item_type = _list_item_type(type_name)
        if item_type is not None:
            if segment == "total_count" and last and index == 0:
                return
            if segment != "data" or last:
                raise _cannot_expand(path, root_type if index == 0 else None)
            type_name = item_type
            continue
        edge = GRAPH.get(type_name, {}).get(segment)
        if edge is None:
            raise _cannot_expand(path, None)
        kind, target = edge
        if kind == "unsupported":
            raise invalid(
                f"This property cannot be expanded ({path}): the Stripe emulator does not "
                f"serve {target}.",
                "expand",
            )
        if kind in ("ref", "refs", "include", "null"):
            depth += 1
            if depth > MAX_DEPTH:
                raise invalid(
                    f"You cannot expand more than {MAX_DEPTH} levels of a property. Property: "
                    f"{path}",
                    "expand",
                )
        if kind == "null":
            if not last:
                raise _cannot_expand(path, None)
            return
        if kind == "embedded" and last:
            raise _cannot_expand(path, None)
        type_name = target


def _cannot_expand(path: str, list_root: str | None) -> StripeError:
    hint = ""
    if list_root is not None and not path.startswith("data."):
        hint = f" You may want to try expanding 'data.{path}' instead."
    return invalid(f"This property cannot be expanded ({path}).{hint}", "expand")


def apply(store: Store, root_type: str, payload: Record, paths: list[str]) -> Record:
    """Expand ``paths`` (already checked) in ``payload`` without touching stored records."""
    keep_total = False
    for path in paths:
        if path == "total_count":
            keep_total = True
            continue
        payload = _apply(store, payload, root_type, path.split("."))
    if not keep_total and "total_count" in payload:
        payload = dict(payload)
        del payload["total_count"]
    return payload


def _apply(store: Store, node: Record, type_name: str, segments: list[str]) -> Record:
    if node.get("deleted"):
        return node  # a deleted stub has nothing to expand
    field, rest = segments[0], segments[1:]
    item_type = _list_item_type(type_name)
    if item_type is not None:
        expanded = dict(node)
        expanded["data"] = [_apply(store, item, item_type, rest) for item in node["data"]]
        return expanded
    kind, target = GRAPH[type_name][field]
    value: Any = node.get(field)
    if kind == "null" or (value is None and kind != "include"):
        return node
    if kind == "ref":
        value = _expand_ref(store, target, value, rest)
    elif kind == "refs":
        value = [_expand_ref(store, target, entry, rest) for entry in value]
    elif kind == "include":
        if not isinstance(value, dict):
            value = _include(store, node, field)
        if rest:
            value = _apply(store, value, target, rest)
    else:  # embedded
        value = _apply(store, value, target, rest)
    expanded = dict(node)
    expanded[field] = value
    return expanded


def _expand_ref(store: Store, target: str, value: Any, rest: list[str]) -> Any:
    if isinstance(value, str):
        value = _resolve(store, target, value)
    if rest and isinstance(value, dict):
        value = _apply(store, value, target, rest)
    return value


def _resolve(store: Store, type_name: str, object_id: str) -> Record | str:
    if type_name == "customer":
        if object_id in store.deleted_customers:
            return {"id": object_id, "object": "customer", "deleted": True}
        return store.customers.get(object_id, object_id)
    if type_name == "price":
        return store.prices.get(object_id, object_id)
    if type_name == "product":
        return store.products.get(object_id, object_id)
    if type_name == "invoice":
        invoice = store.invoices.get(object_id)
        return object_id if invoice is None else render_invoice(invoice)
    if type_name == "discount":
        return store.discounts.get(object_id, object_id)
    if type_name == "coupon":
        coupon = store.coupons.get(object_id) or store.deleted_coupons.get(object_id)
        return object_id if coupon is None else coupon
    if type_name == "subscription_schedule":
        return store.subscription_schedules.get(object_id, object_id)
    if type_name == "subscription":
        subscription = store.subscriptions.get(object_id)
        return object_id if subscription is None else render_subscription(store, subscription)
    raise AssertionError(f"no resolver for {type_name}")


def _include(store: Store, customer: Record, field: str) -> Record:
    customer_id = customer["id"]
    if field == "tax_ids":
        ids = store.customer_tax_ids.get(customer_id, [])
        records = [store.tax_ids[tax_id] for tax_id in reversed(ids)]
        return list_object(f"/v1/customers/{customer_id}/tax_ids", records[:10], len(ids) > 10)
    subscriptions = [
        render_subscription(store, record)
        for record in reversed(store.subscriptions.values())
        if record["customer"] == customer_id and record["status"] != "canceled"
    ]
    return list_object(
        f"/v1/customers/{customer_id}/subscriptions", subscriptions[:10], len(subscriptions) > 10
    )
