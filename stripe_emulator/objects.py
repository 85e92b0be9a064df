"""Builders for Stripe objects with exactly Stripe's key sets.

Each builder returns every key of the object as Stripe's fixtures (``fixtures3.json``) define it
for API version 2026-10-28.endive; fields the emulator does not model carry Stripe's defaults
for a fresh test-mode object (``None``, ``False``, ``{}`` or ``[]``). Like Stripe, ``id`` and
``object`` come first and the rest is alphabetical. Note that in this API version
``current_period_start``/``current_period_end`` live on subscription items, not subscriptions.
"""

from __future__ import annotations

from typing import Any

from stripe_emulator.state import Record, Store

ADDRESS_FIELDS = ("city", "country", "line1", "line2", "postal_code", "state")


def address(values: dict[str, Any]) -> Record:
    return {field: values.get(field) for field in ADDRESS_FIELDS}


def customer(customer_id: str, created: int, fields: dict[str, Any], invoice_prefix: str) -> Record:
    return {
        "id": customer_id,
        "object": "customer",
        "address": fields.get("address"),
        "balance": fields.get("balance", 0),
        "created": created,
        "currency": None,
        "default_source": None,
        "delinquent": False,
        "description": fields.get("description"),
        "discount": None,
        "email": fields.get("email"),
        "invoice_prefix": fields.get("invoice_prefix", invoice_prefix),
        "invoice_settings": {
            "custom_fields": None,
            "default_payment_method": None,
            "footer": None,
            "rendering_options": None,
        },
        "livemode": False,
        "metadata": fields.get("metadata", {}),
        "name": fields.get("name"),
        "next_invoice_sequence": fields.get("next_invoice_sequence", 1),
        "phone": fields.get("phone"),
        "preferred_locales": fields.get("preferred_locales", []),
        "shipping": fields.get("shipping"),
        "tax_exempt": fields.get("tax_exempt", "none"),
        "test_clock": None,
    }


def tax_id(
    tax_id_id: str,
    created: int,
    customer_id: str,
    tax_type: str,
    value: str,
    country: str | None,
    verification: dict[str, Any] | None,
) -> Record:
    return {
        "id": tax_id_id,
        "object": "tax_id",
        "country": country,
        "created": created,
        "customer": customer_id,
        "customer_account": None,
        "livemode": False,
        "owner": {"customer": customer_id, "customer_account": None, "type": "customer"},
        "type": tax_type,
        "value": value,
        "verification": verification,
    }


def product(product_id: str, created: int, fields: dict[str, Any]) -> Record:
    return {
        "id": product_id,
        "object": "product",
        "active": fields.get("active", True),
        "created": created,
        "default_price": None,
        "description": fields.get("description"),
        "images": fields.get("images", []),
        "livemode": False,
        "marketing_features": fields.get("marketing_features", []),
        "metadata": fields.get("metadata", {}),
        "name": fields["name"],
        "package_dimensions": fields.get("package_dimensions"),
        "shippable": fields.get("shippable"),
        "statement_descriptor": fields.get("statement_descriptor"),
        "tax_code": fields.get("tax_code"),
        "type": "service",
        "unit_label": fields.get("unit_label"),
        "updated": created,
        "url": fields.get("url"),
    }


def price(price_id: str, created: int, product_id: str, fields: dict[str, Any]) -> Record:
    recurring = fields.get("recurring")
    unit_amount: int = fields["unit_amount"]
    return {
        "id": price_id,
        "object": "price",
        "active": fields.get("active", True),
        "billing_scheme": "per_unit",
        "created": created,
        "currency": fields["currency"],
        "custom_unit_amount": None,
        "livemode": False,
        "lookup_key": fields.get("lookup_key"),
        "metadata": fields.get("metadata", {}),
        "nickname": fields.get("nickname"),
        "product": product_id,
        "recurring": None
        if recurring is None
        else {
            "interval": recurring["interval"],
            "interval_count": recurring.get("interval_count", 1),
            "meter": None,
            "trial_period_days": None,
            "usage_type": "licensed",
        },
        "tax_behavior": fields.get("tax_behavior", "unspecified"),
        "tiers_mode": None,
        "transform_quantity": None,
        "type": "one_time" if recurring is None else "recurring",
        "unit_amount": unit_amount,
        "unit_amount_decimal": str(unit_amount),
    }


def plan_from_price(price_record: Record) -> Record:
    """The legacy ``plan`` Stripe still mirrors on subscription items for recurring prices."""
    recurring = price_record["recurring"] or {}
    return {
        "id": price_record["id"],
        "object": "plan",
        "active": price_record["active"],
        "amount": price_record["unit_amount"],
        "amount_decimal": price_record["unit_amount_decimal"],
        "billing_scheme": price_record["billing_scheme"],
        "created": price_record["created"],
        "currency": price_record["currency"],
        "interval": recurring.get("interval"),
        "interval_count": recurring.get("interval_count"),
        "livemode": False,
        "metadata": price_record["metadata"],
        "meter": None,
        "nickname": price_record["nickname"],
        "product": price_record["product"],
        "tiers_mode": None,
        "transform_usage": None,
        "trial_period_days": None,
        "usage_type": "licensed",
    }


def billing_mode(mode: str, created: int, proration_discounts: str = "included") -> Record:
    """A subscription's ``billing_mode`` as Stripe shows it (``classic`` or ``flexible``, with
    how its prorations show their discounts: ``included`` or ``itemized``)."""
    if mode == "classic":
        return {"flexible": None, "type": "classic", "updated_at": None}
    return {
        "flexible": {"proration_discounts": proration_discounts},
        "type": "flexible",
        "updated_at": created,
    }


def is_flexible(subscription: Record) -> bool:
    """Whether ``subscription`` bills in flexible mode (its credits follow its debits)."""
    mode: str = (subscription.get("billing_mode") or {}).get("type", "classic")
    return mode == "flexible"


def subscription(
    subscription_id: str, created: int, customer_id: str, currency: str, fields: dict[str, Any]
) -> Record:
    """A subscription record without ``items`` (rendered from the item store)."""
    return {
        "id": subscription_id,
        "object": "subscription",
        "application": None,
        "application_fee_percent": None,
        "automatic_tax": {"disabled_reason": None, "enabled": False, "liability": None},
        "billing_cycle_anchor": fields["billing_cycle_anchor"],
        "billing_cycle_anchor_config": None,
        "billing_mode": billing_mode(
            fields.get("billing_mode", "flexible"),
            created,
            fields.get("proration_discounts", "included"),
        ),
        "billing_schedules": [],
        "billing_thresholds": None,
        "cancel_at": None,
        "cancel_at_period_end": False,
        "canceled_at": None,
        "cancellation_details": {"comment": None, "feedback": None, "reason": None},
        "collection_method": fields.get("collection_method", "charge_automatically"),
        "created": created,
        "currency": currency,
        "customer": customer_id,
        "customer_account": None,
        "days_until_due": fields.get("days_until_due"),
        "default_payment_method": None,
        "default_source": None,
        "default_tax_rates": [],
        "description": fields.get("description"),
        "discounts": [],
        "ended_at": None,
        "invoice_settings": {
            "account_tax_ids": None,
            "custom_fields": None,
            "description": None,
            "footer": None,
            "issuer": {"type": "self"},
        },
        "latest_invoice": None,
        "livemode": False,
        "managed_payments": {"enabled": False},
        "metadata": fields.get("metadata", {}),
        "next_pending_invoice_item_invoice": None,
        "on_behalf_of": None,
        "pause_collection": None,
        "payment_settings": {
            "payment_method_options": None,
            "payment_method_types": None,
            "save_default_payment_method": "off",
        },
        "pending_invoice_item_interval": None,
        "pending_setup_intent": None,
        "pending_update": None,
        "schedule": None,
        "start_date": created,
        "status": fields["status"],
        "test_clock": None,
        "transfer_data": None,
        "trial_end": fields.get("trial_end"),
        "trial_settings": {"end_behavior": {"missing_payment_method": "create_invoice"}},
        "trial_start": fields.get("trial_start"),
    }


def subscription_item(
    item_id: str,
    created: int,
    subscription_id: str,
    price_id: str,
    quantity: int,
    metadata: dict[str, str],
    period: tuple[int, int],
) -> Record:
    """An item record; ``price`` holds the price id until rendered."""
    return {
        "id": item_id,
        "object": "subscription_item",
        "billing_thresholds": None,
        "created": created,
        "current_period_end": period[1],
        "current_period_start": period[0],
        "discounts": [],
        "metadata": metadata,
        "plan": None,
        "price": price_id,
        "quantity": quantity,
        "subscription": subscription_id,
        "tax_rates": [],
    }


def webhook_endpoint(endpoint_id: str, created: int, fields: dict[str, Any]) -> Record:
    """A webhook endpoint as stored and served (its ``secret`` is kept apart, see
    :mod:`stripe_emulator.resources.webhook_endpoints`)."""
    return {
        "id": endpoint_id,
        "object": "webhook_endpoint",
        "api_version": fields.get("api_version"),
        "application": None,
        "created": created,
        "description": fields.get("description"),
        "enabled_events": fields["enabled_events"],
        "livemode": False,
        "metadata": fields.get("metadata", {}),
        "status": "enabled",
        "url": fields["url"],
    }


def deleted(object_id: str, object_type: str) -> Record:
    return {"id": object_id, "object": object_type, "deleted": True}


def list_object(url: str, data: list[Record], has_more: bool) -> Record:
    return {"object": "list", "data": data, "has_more": has_more, "url": url}


# Rendering (records that reference other records) -------------------------------------------


def render_item(store: Store, item: Record) -> Record:
    price_record = store.prices[item["price"]]
    rendered = dict(item)
    rendered["price"] = dict(price_record)  # a copy: events keep renderings as snapshots
    rendered["plan"] = plan_from_price(price_record)
    return rendered


def render_subscription(store: Store, record: Record) -> Record:
    subscription_id = record["id"]
    items = [
        render_item(store, store.subscription_items[item_id])
        for item_id in store.items_of[subscription_id]
    ]
    rendered = dict(record)
    rendered["items"] = list_object(
        f"/v1/subscription_items?subscription={subscription_id}", items, False
    )
    return rendered


def render_invoice(invoice: Record, embedded_lines: int = 10) -> Record:
    """An invoice as Stripe answers it: at most its first 10 lines embedded."""
    lines = invoice["lines"]
    if len(lines["data"]) <= embedded_lines:
        return invoice
    rendered = dict(invoice)
    rendered["lines"] = {**lines, "data": lines["data"][:embedded_lines], "has_more": True}
    return rendered
