"""Coupons, and a subscription's discounts.

Routes: ``POST/GET /v1/coupons``, ``GET/POST/DELETE /v1/coupons/{id}``,
``DELETE /v1/subscriptions/{id}/discount``.

A coupon takes exactly one of ``percent_off`` (a decimal, 0 < x <= 100) or ``amount_off`` (an
integer > 0, with ``currency``) off; ``duration`` is ``once`` (the default), ``forever`` or
``repeating`` (then, and only then, with ``duration_in_months``). Its id is ``id`` if given,
else 8 generated letters and digits. Only ``name`` and ``metadata`` can be updated. A deleted
coupon can no longer be redeemed (``resource_missing``), but the discounts made from it keep
applying (:mod:`stripe_emulator.discounts`). ``max_redemptions`` makes it ``valid: false``
once redeemed that many times. Not emulated: ``redeem_by``, ``applies_to``,
``currency_options``, promotion codes; coupon events.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from stripe_emulator import currencies, discounts, objects, recorder
from stripe_emulator.errors import StripeError, invalid
from stripe_emulator.ids import coupon_id
from stripe_emulator.params import PAGINATION, Enum, Int, Metadata, Range, Str, schema
from stripe_emulator.resources.common import (
    Ctx,
    Endpoint,
    created_matches,
    lookup,
    metadata_for_create,
    metadata_for_update,
    newest_first,
    only_one_of,
    paginate,
)
from stripe_emulator.resources.subscriptions import subscription_of
from stripe_emulator.state import Record

CREATE = schema(
    {
        "amount_off": Int(),
        "currency": Str(),
        "duration": Enum("forever", "once", "repeating"),
        "duration_in_months": Int(),
        "id": Str(),
        "max_redemptions": Int(),
        "metadata": Metadata(),
        "name": Str(max_length=40),
        "percent_off": Str(),
    }
)
UPDATE = schema({"metadata": Metadata(), "name": Str(max_length=40, emptyable=True)})
RETRIEVE = schema({})
DELETE = schema({}, expandable=False)
LIST = schema({"created": Range(), **PAGINATION})


def _percent(raw: str) -> float:
    try:
        value = Decimal(raw)
    except ArithmeticError:
        value = Decimal("NaN")
    if not value.is_finite():
        raise invalid(f"Invalid decimal: {raw}", "percent_off")
    if not 0 < value <= 100:
        raise invalid(
            "Invalid percent_off: must be greater than 0 and less than or equal to 100.",
            "percent_off",
        )
    return float(value)


def _terms(params: dict[str, Any]) -> dict[str, Any]:
    """The validated ``percent_off``/``amount_off``/``currency``/``duration`` fields."""
    only_one_of(params, "percent_off", "amount_off")
    if "percent_off" not in params and "amount_off" not in params:
        raise invalid(
            "You must pass either `percent_off` or `amount_off`.",
            "percent_off",
            "parameter_missing",
        )
    terms: dict[str, Any] = {"percent_off": None, "amount_off": None, "currency": None}
    if "percent_off" in params:
        terms["percent_off"] = _percent(params["percent_off"])
        if "currency" in params:
            terms["currency"] = currencies.check(params["currency"])
    else:
        if "currency" not in params:
            raise invalid(
                "Missing required param: currency. (A coupon with `amount_off` needs a currency.)",
                "currency",
                "parameter_missing",
            )
        amount = params["amount_off"]
        if amount <= 0:
            raise invalid("Invalid amount_off: must be greater than 0.", "amount_off")
        terms["currency"] = currencies.check(params["currency"])
        currencies.check_amount(terms["currency"], amount, "amount_off")
        terms["amount_off"] = amount
    duration = params.get("duration", "once")
    months = params.get("duration_in_months")
    if duration == "repeating" and months is None:
        raise invalid(
            "Missing required param: duration_in_months.",
            "duration_in_months",
            "parameter_missing",
        )
    if duration != "repeating" and months is not None:
        raise invalid(
            "You can only pass `duration_in_months` when `duration` is `repeating`.",
            "duration_in_months",
        )
    if months is not None and months <= 0:
        raise invalid("Invalid duration_in_months: must be greater than 0.", "duration_in_months")
    terms.update(duration=duration, duration_in_months=months)
    return terms


def create(ctx: Ctx, params: dict[str, Any]) -> Record:
    store = ctx.store
    terms = _terms(params)
    limit = params.get("max_redemptions")
    if limit is not None and limit <= 0:
        raise invalid("Invalid max_redemptions: must be greater than 0.", "max_redemptions")
    new_id = params.get("id") or coupon_id()
    if new_id in store.coupons:
        raise invalid("Coupon already exists.", "id", "resource_already_exists")
    record = {
        "id": new_id,
        "object": "coupon",
        "amount_off": terms["amount_off"],
        "created": ctx.now,
        "currency": terms["currency"],
        "duration": terms["duration"],
        "duration_in_months": terms["duration_in_months"],
        "livemode": False,
        "max_redemptions": limit,
        "metadata": metadata_for_create(params.get("metadata")),
        "name": params.get("name"),
        "percent_off": terms["percent_off"],
        "redeem_by": None,
        "times_redeemed": 0,
        "valid": True,
    }
    store.coupons[new_id] = record
    return record


def retrieve(ctx: Ctx, params: dict[str, Any]) -> Record:
    return lookup(ctx.store.coupons, ctx.path["id"], "coupon")


def update(ctx: Ctx, params: dict[str, Any]) -> Record:
    record = lookup(ctx.store.coupons, ctx.path["id"], "coupon")
    if "name" in params:
        record["name"] = params["name"] if isinstance(params["name"], str) else None
    if "metadata" in params:
        record["metadata"] = metadata_for_update(record["metadata"], params["metadata"])
    return record


def delete(ctx: Ctx, params: dict[str, Any]) -> Record:
    store = ctx.store
    record = lookup(store.coupons, ctx.path["id"], "coupon")
    del store.coupons[record["id"]]
    store.deleted_coupons[record["id"]] = {**record, "valid": False}
    return objects.deleted(record["id"], "coupon")


def list_(ctx: Ctx, params: dict[str, Any]) -> Record:
    records = [
        record
        for record in newest_first(ctx.store.coupons)
        if created_matches(record["created"], params.get("created"))
    ]
    return paginate(records, params, "/v1/coupons", "coupon")


def delete_subscription_discount(ctx: Ctx, params: dict[str, Any]) -> Record:
    """Remove the subscription's discounts; answer the first, deleted."""
    store = ctx.store
    record = subscription_of(ctx)
    if not record["discounts"]:
        raise StripeError(
            404,
            f"No active discount for subscription: '{record['id']}'",
            code="resource_missing",
            param="id",
        )
    recorder.subscription(store, record)
    first = store.discounts[record["discounts"][0]]
    record["discounts"] = []
    return discounts.deleted_discount(first)


ROUTES = (
    Endpoint("POST", "/v1/coupons", CREATE, create, "coupon"),
    Endpoint("GET", "/v1/coupons", LIST, list_, "list<coupon>"),
    Endpoint("GET", "/v1/coupons/{id}", RETRIEVE, retrieve, "coupon"),
    Endpoint("POST", "/v1/coupons/{id}", UPDATE, update, "coupon"),
    Endpoint("DELETE", "/v1/coupons/{id}", DELETE, delete, "deleted"),
    Endpoint(
        "DELETE",
        "/v1/subscriptions/{id}/discount",
        DELETE,
        delete_subscription_discount,
        "deleted",
    ),
)
