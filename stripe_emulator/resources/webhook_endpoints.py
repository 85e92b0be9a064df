"""Webhook endpoints: ``POST/GET /v1/webhook_endpoints``,
``GET/POST/DELETE /v1/webhook_endpoints/{id}``.

As on Stripe: ``url`` and ``enabled_events`` are required (each a Stripe event type, or ``*``
for all; anything else is a 400 naming ``enabled_events[n]``), the URL must be ``http://`` or
``https://`` with a host (400 ``url_invalid`` on ``url``; test mode accepts plain http),
``description`` and ``metadata`` are optional, an account has at most 16 endpoints, and the
signing ``secret`` (``whsec_...``) appears in the create answer only: retrieving, listing and
updating leave the key out. An update changes ``url``, ``enabled_events``, ``description``,
``metadata`` and ``disabled`` (``status`` becomes ``disabled`` or ``enabled``); ``api_version``
is fixed at creation. Events are rendered in the emulator's one API version, so an
``api_version`` other than ``2026-10-28.endive`` is refused (400 on ``api_version``), and
``connect=true`` is refused (no Connect). Delivery: :mod:`stripe_emulator.webhooks`.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from stripe_emulator import objects
from stripe_emulator.config import API_VERSION
from stripe_emulator.errors import invalid
from stripe_emulator.events import API_VERSIONS, EVENT_TYPES
from stripe_emulator.ids import new_id
from stripe_emulator.params import PAGINATION, UNSET, Arr, Bool, Enum, Metadata, Str, schema
from stripe_emulator.resources.common import (
    Ctx,
    Endpoint,
    lookup,
    metadata_for_create,
    metadata_for_update,
    newest_first,
    paginate,
)
from stripe_emulator.state import Record

MAX_ENDPOINTS = 16
_EVENTS = Arr(Enum(*EVENT_TYPES))

CREATE = schema(
    {
        "api_version": Str(),
        "connect": Bool(),
        "description": Str(emptyable=True),
        "enabled_events": Arr(Enum(*EVENT_TYPES), required=True),
        "metadata": Metadata(),
        "url": Str(required=True),
    }
)
UPDATE = schema(
    {
        "description": Str(emptyable=True),
        "disabled": Bool(),
        "enabled_events": _EVENTS,
        "metadata": Metadata(),
        "url": Str(),
    }
)
RETRIEVE = schema({})
DELETE = schema({}, expandable=False)
LIST = schema(dict(PAGINATION))


def _check_url(url: str) -> str:
    try:
        parts = urlsplit(url)
        valid = parts.scheme in ("http", "https") and bool(parts.hostname)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        valid = False
    if not valid:
        raise invalid(
            f"Invalid URL: {url}. A webhook endpoint URL must be an http:// or https:// URL "
            "with a host.",
            "url",
            "url_invalid",
        )
    return url


def _check_api_version(version: str) -> str:
    if version not in API_VERSIONS:
        raise invalid(f"Invalid api_version: {version}", "api_version")
    if version != API_VERSION:
        raise invalid(
            f"The Stripe emulator renders events in API version {API_VERSION} only; "
            f"it cannot send {version} events.",
            "api_version",
        )
    return version


def _description(params: dict[str, Any]) -> str | None:
    value = params["description"]
    return None if value is UNSET else str(value)


def with_secret(record: Record, secret: str) -> Record:
    """The create answer: the endpoint plus its ``secret`` (keys in Stripe's order)."""
    answer = dict(record)
    answer["secret"] = secret
    return {key: answer[key] for key in ("id", "object", *sorted(set(answer) - {"id", "object"}))}


def create(ctx: Ctx, params: dict[str, Any]) -> Record:
    store = ctx.store
    if len(store.webhook_endpoints) >= MAX_ENDPOINTS:
        raise invalid(f"You have reached the maximum of {MAX_ENDPOINTS} test webhook endpoints.")
    if params.get("connect"):
        raise invalid("The Stripe emulator does not support Connect webhook endpoints.", "connect")
    fields: dict[str, Any] = {
        "url": _check_url(params["url"]),
        "enabled_events": list(params["enabled_events"]),
        "metadata": metadata_for_create(params.get("metadata")),
    }
    if "api_version" in params:
        fields["api_version"] = _check_api_version(params["api_version"])
    if "description" in params:
        fields["description"] = _description(params)
    record = objects.webhook_endpoint(new_id("we"), ctx.now, fields)
    secret = new_id("whsec")
    store.webhook_endpoints[record["id"]] = record
    store.webhook_secrets[record["id"]] = secret
    store.events.endpoints_changed()
    return with_secret(record, secret)


def _endpoint(ctx: Ctx) -> Record:
    return lookup(ctx.store.webhook_endpoints, ctx.path["id"], "webhook endpoint")


def retrieve(ctx: Ctx, params: dict[str, Any]) -> Record:
    return _endpoint(ctx)


def update(ctx: Ctx, params: dict[str, Any]) -> Record:
    record = _endpoint(ctx)
    changes: dict[str, Any] = {}
    if "url" in params:
        changes["url"] = _check_url(params["url"])
    if "enabled_events" in params:
        changes["enabled_events"] = list(params["enabled_events"])
    if "description" in params:
        changes["description"] = _description(params)
    if "metadata" in params:
        changes["metadata"] = metadata_for_update(record["metadata"], params["metadata"])
    if "disabled" in params:
        changes["status"] = "disabled" if params["disabled"] else "enabled"
    record.update(changes)
    ctx.store.events.endpoints_changed()
    return record


def delete(ctx: Ctx, params: dict[str, Any]) -> Record:
    record = _endpoint(ctx)
    del ctx.store.webhook_endpoints[record["id"]]
    ctx.store.webhook_secrets.pop(record["id"], None)
    ctx.store.webhook_rolled.pop(record["id"], None)
    ctx.store.events.endpoints_changed()
    return objects.deleted(record["id"], "webhook_endpoint")


def list_(ctx: Ctx, params: dict[str, Any]) -> Record:
    records = newest_first(ctx.store.webhook_endpoints)
    return paginate(records, params, "/v1/webhook_endpoints", "webhook endpoint")


ROUTES = (
    Endpoint("POST", "/v1/webhook_endpoints", CREATE, create, "webhook_endpoint"),
    Endpoint("GET", "/v1/webhook_endpoints", LIST, list_, "list<webhook_endpoint>"),
    Endpoint("GET", "/v1/webhook_endpoints/{id}", RETRIEVE, retrieve, "webhook_endpoint"),
    Endpoint("POST", "/v1/webhook_endpoints/{id}", UPDATE, update, "webhook_endpoint"),
    Endpoint("DELETE", "/v1/webhook_endpoints/{id}", DELETE, delete, "deleted"),
)
