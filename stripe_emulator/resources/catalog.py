"""Products and prices.

Routes: ``POST/GET /v1/products``, ``GET/POST/DELETE /v1/products/{id}``,
``POST/GET /v1/prices``, ``GET/POST /v1/prices/{price}``.

Prices are per-unit with a fixed ``unit_amount`` (no tiers, no custom amounts, no metered
usage), in one of Stripe's currencies (see :mod:`stripe_emulator.currencies`: an unknown code is
a 400 naming ``currency``, a three-decimal amount must end in 0). Lookup keys are unique
across prices; ``transfer_lookup_key=true`` moves one, as on Stripe. A product with prices
cannot be deleted.
"""

from __future__ import annotations

from typing import Any

from stripe_emulator import currencies, objects, recorder
from stripe_emulator.errors import invalid
from stripe_emulator.ids import new_id
from stripe_emulator.params import (
    PAGINATION,
    UNSET,
    Arr,
    Bool,
    Enum,
    Field,
    Int,
    Metadata,
    Num,
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
    only_one_of,
    paginate,
)
from stripe_emulator.state import Record, Store

INTERVALS = ("day", "month", "week", "year")
# Stripe's longest billing period is three years.
MAX_INTERVAL_COUNT = {"day": 1095, "week": 156, "month": 36, "year": 3}
_TAX_BEHAVIOR = Enum("exclusive", "inclusive", "unspecified")


def _product_fields(*, creating: bool) -> dict[str, Field]:
    emptyable = not creating  # several product fields can be unset on update only
    return {
        "active": Bool(),
        "description": Str(emptyable=emptyable),
        "images": Arr(Str(), max_items=8, emptyable=emptyable),
        "marketing_features": Arr(
            Obj({"name": Str(required=True, max_length=80)}), max_items=15, emptyable=emptyable
        ),
        "metadata": Metadata(),
        "name": Str(required=creating),
        "package_dimensions": Obj(
            {
                "height": Num(required=True),
                "length": Num(required=True),
                "weight": Num(required=True),
                "width": Num(required=True),
            },
            emptyable=emptyable,
        ),
        "shippable": Bool(),
        "statement_descriptor": Str(max_length=22),
        "tax_code": Str(emptyable=emptyable),
        "unit_label": Str(emptyable=emptyable),
        "url": Str(emptyable=emptyable),
    }


PRODUCT_CREATE = schema({"id": Str(), **_product_fields(creating=True)})
PRODUCT_UPDATE = schema({"default_price": Str(), **_product_fields(creating=False)})
PRODUCT_RETRIEVE = schema({})
PRODUCT_DELETE = schema({}, expandable=False)
PRODUCT_LIST = schema(
    {
        "active": Bool(),
        "created": Range(),
        "ids": Arr(Str()),
        "shippable": Bool(),
        "url": Str(),
        **PAGINATION,
    }
)

PRICE_CREATE = schema(
    {
        "active": Bool(),
        "currency": Str(required=True),
        "lookup_key": Str(max_length=200),
        "metadata": Metadata(),
        "nickname": Str(),
        "product": Str(),
        "product_data": Obj(
            {
                "active": Bool(),
                "id": Str(),
                "metadata": Metadata(),
                "name": Str(required=True),
                "statement_descriptor": Str(max_length=22),
                "tax_code": Str(),
                "unit_label": Str(),
            }
        ),
        "recurring": Obj(
            {
                "interval": Enum(*INTERVALS, required=True),
                "interval_count": Int(minimum=1),
                "usage_type": Enum("licensed"),
            }
        ),
        "tax_behavior": _TAX_BEHAVIOR,
        "transfer_lookup_key": Bool(),
        "unit_amount": Int(minimum=0),
    }
)
PRICE_UPDATE = schema(
    {
        "active": Bool(),
        "lookup_key": Str(max_length=200),
        "metadata": Metadata(),
        "nickname": Str(),
        "tax_behavior": _TAX_BEHAVIOR,
        "transfer_lookup_key": Bool(),
    }
)
PRICE_RETRIEVE = schema({})
PRICE_LIST = schema(
    {
        "active": Bool(),
        "created": Range(),
        "currency": Str(),
        "lookup_keys": Arr(Str(), max_items=10),
        "product": Str(),
        "recurring": Obj({"interval": Enum(*INTERVALS), "usage_type": Enum("licensed")}),
        "type": Enum("one_time", "recurring"),
        **PAGINATION,
    }
)


# Products -------------------------------------------------------------------------------------


def _product_values(params: dict[str, Any], current: Record | None) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for key, value in params.items():
        if key in ("expand", "id", "metadata", "default_price"):
            continue
        if key == "package_dimensions" and value is not UNSET:
            value = {name: value[name] for name in ("height", "length", "weight", "width")}
        if key == "marketing_features" and value is not UNSET:
            value = [{"name": feature["name"]} for feature in value]
        values[key] = (
            ([] if key in ("images", "marketing_features") else None) if (value is UNSET) else value
        )
    if current is None:
        values["metadata"] = metadata_for_create(params.get("metadata"))
    elif "metadata" in params:
        values["metadata"] = metadata_for_update(current["metadata"], params["metadata"])
    return values


def _new_product(store: Store, now: int, params: dict[str, Any]) -> Record:
    product_id = params.get("id") or new_id("prod")
    if product_id in store.products:
        raise invalid(f"Product already exists: {product_id}", "id", "resource_already_exists")
    record = objects.product(product_id, now, _product_values(params, None))
    store.products[product_id] = record
    recorder.product(store, record, created=True)
    return record


def create_product(ctx: Ctx, params: dict[str, Any]) -> Record:
    return _new_product(ctx.store, ctx.now, params)


def retrieve_product(ctx: Ctx, params: dict[str, Any]) -> Record:
    return lookup(ctx.store.products, ctx.path["id"], "product")


def update_product(ctx: Ctx, params: dict[str, Any]) -> Record:
    record = lookup(ctx.store.products, ctx.path["id"], "product")
    values = _product_values(params, record)
    if "default_price" in params:
        price = lookup(ctx.store.prices, params["default_price"], "price", "default_price")
        if price["product"] != record["id"]:
            raise invalid(
                f"The price {price['id']} does not belong to product {record['id']}.",
                "default_price",
            )
        values["default_price"] = price["id"]
    recorder.product(ctx.store, record)
    record.update(values)
    record["updated"] = ctx.now
    return record


def delete_product(ctx: Ctx, params: dict[str, Any]) -> Record:
    record = lookup(ctx.store.products, ctx.path["id"], "product")
    if any(price["product"] == record["id"] for price in ctx.store.prices.values()):
        raise invalid(
            "This product cannot be deleted because it has one or more user-created prices."
        )
    del ctx.store.products[record["id"]]
    recorder.deleted(ctx.store, "product.deleted", record)
    return objects.deleted(record["id"], "product")


def list_products(ctx: Ctx, params: dict[str, Any]) -> Record:
    ids = set(params["ids"]) if "ids" in params else None
    records = [
        record
        for record in newest_first(ctx.store.products)
        if (ids is None or record["id"] in ids)
        and params.get("active", record["active"]) == record["active"]
        and params.get("shippable", record["shippable"]) == record["shippable"]
        and params.get("url", record["url"]) == record["url"]
        and created_matches(record["created"], params.get("created"))
    ]
    return paginate(records, params, "/v1/products", "product")


# Prices ---------------------------------------------------------------------------------------


def _claim_lookup_key(store: Store, params: dict[str, Any], price_id: str) -> None:
    key = params.get("lookup_key")
    if key is None:
        return
    holder = store.price_lookup_keys.get(key)
    if holder is not None and holder != price_id:
        if not params.get("transfer_lookup_key", False):
            raise invalid(f"A price (`{holder}`) already uses that lookup key.", "lookup_key")
        recorder.price(store, store.prices[holder])
        store.prices[holder]["lookup_key"] = None
    current = store.prices.get(price_id)
    if current is not None and current["lookup_key"] not in (None, key):
        store.price_lookup_keys.pop(current["lookup_key"], None)
    store.price_lookup_keys[key] = price_id


def create_price(ctx: Ctx, params: dict[str, Any]) -> Record:
    store = ctx.store
    only_one_of(params, "product", "product_data")
    if "product" not in params and "product_data" not in params:
        raise invalid(
            "You must specify either `product` or `product_data` when creating a price.",
            "product",
            "parameter_missing",
        )
    if "unit_amount" not in params:
        raise invalid("Missing required param: unit_amount.", "unit_amount", "parameter_missing")
    currency = currencies.check(params["currency"])
    currencies.check_amount(currency, params["unit_amount"], "unit_amount")
    recurring = params.get("recurring")
    if recurring is not None:
        count = recurring.get("interval_count", 1)
        if count > MAX_INTERVAL_COUNT[recurring["interval"]]:
            raise invalid(
                "Invalid recurring[interval_count]: the maximum billing period is 3 years.",
                "recurring[interval_count]",
            )
    if "product" in params:
        product_id = lookup(store.products, params["product"], "product", "product")["id"]
    else:
        product_id = _new_product(store, ctx.now, params["product_data"])["id"]
    price_id = new_id("price")
    _claim_lookup_key(store, params, price_id)
    fields = dict(params, currency=currency, metadata=metadata_for_create(params.get("metadata")))
    record = objects.price(price_id, ctx.now, product_id, fields)
    store.prices[price_id] = record
    recorder.price(store, record, created=True)
    return record


def retrieve_price(ctx: Ctx, params: dict[str, Any]) -> Record:
    return lookup(ctx.store.prices, ctx.path["price"], "price")


def update_price(ctx: Ctx, params: dict[str, Any]) -> Record:
    record = lookup(ctx.store.prices, ctx.path["price"], "price")
    recorder.price(ctx.store, record)
    _claim_lookup_key(ctx.store, params, record["id"])
    for key in ("active", "lookup_key", "nickname", "tax_behavior"):
        if key in params:
            record[key] = params[key]
    if "metadata" in params:
        record["metadata"] = metadata_for_update(record["metadata"], params["metadata"])
    return record


def list_prices(ctx: Ctx, params: dict[str, Any]) -> Record:
    lookup_keys = set(params["lookup_keys"]) if "lookup_keys" in params else None
    currency: str | None = params.get("currency")
    if currency is not None:
        currency = currencies.check(currency)
    recurring_filter = params.get("recurring", {})
    records = [
        record
        for record in newest_first(ctx.store.prices)
        if (lookup_keys is None or record["lookup_key"] in lookup_keys)
        and params.get("active", record["active"]) == record["active"]
        and params.get("product", record["product"]) == record["product"]
        and (currency is None or currency == record["currency"])
        and params.get("type", record["type"]) == record["type"]
        and _recurring_matches(record, recurring_filter)
        and created_matches(record["created"], params.get("created"))
    ]
    return paginate(records, params, "/v1/prices", "price")


def _recurring_matches(record: Record, wanted: dict[str, str]) -> bool:
    if not wanted:
        return True
    recurring = record["recurring"]
    if recurring is None:
        return False
    return all(recurring.get(key) == value for key, value in wanted.items())


ROUTES = (
    Endpoint("POST", "/v1/products", PRODUCT_CREATE, create_product, "product"),
    Endpoint("GET", "/v1/products", PRODUCT_LIST, list_products, "list<product>"),
    Endpoint("GET", "/v1/products/{id}", PRODUCT_RETRIEVE, retrieve_product, "product"),
    Endpoint("POST", "/v1/products/{id}", PRODUCT_UPDATE, update_product, "product"),
    Endpoint("DELETE", "/v1/products/{id}", PRODUCT_DELETE, delete_product, "deleted"),
    Endpoint("POST", "/v1/prices", PRICE_CREATE, create_price, "price"),
    Endpoint("GET", "/v1/prices", PRICE_LIST, list_prices, "list<price>"),
    Endpoint("GET", "/v1/prices/{price}", PRICE_RETRIEVE, retrieve_price, "price"),
    Endpoint("POST", "/v1/prices/{price}", PRICE_UPDATE, update_price, "price"),
)
