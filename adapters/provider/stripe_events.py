"""A Stripe event routed to the object it names, which the sync then reads again at Stripe
(the event's copy of the object is never trusted: it may be stale or out of order).

A verified event is still checked before anything is recorded: a signature says who sent
the body, not that every field is what Stripe would send. Its id and the id of the object it
routes to are in Stripe's id alphabet and within our caps, its ``created`` is a time, its
``type`` a string; anything else is :class:`NotAStripeEvent`, naming the field, and the
endpoint answers 400 without recording.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any, Literal

from domain.provider.sync import HANDLED_EVENT_TYPES, ProviderEvent

STRIPE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_]*")
"""Stripe's ids: a prefix, an underscore and base-62 characters (``evt_1Q…``, ``sub_…``)."""
MAX_EVENT_ID_LENGTH = 57
"""Stripe's event ids are 28 characters; ours is the cap the endpoint has always held them to
(the event names the sync it recorded, ``SyncStripeObject.event_id``)."""
MAX_OBJECT_ID_LENGTH = 128
"""Our resource ids' cap (:data:`domain.messages.ResourceId`); Stripe's are about 30."""
MAX_EVENT_TYPE_LENGTH = 255
LATEST_CREATED = int(datetime(9999, 12, 31, tzinfo=UTC).timestamp())
"""A ``created`` past this is not a time a datetime can hold."""


class NotAStripeEvent(ValueError):
    """A verified body that is not a Stripe event we can route: ``field`` says where."""

    def __init__(self, message: str, field: str = "body", description: str = "") -> None:
        super().__init__(message)
        self.field = field
        self.description = description or message


def event_of(document: Any) -> ProviderEvent:
    """Route a Stripe event: the object it names, re-read by the sync. Only an event of a
    type we handle is routed (an unknown type's object is never looked at)."""
    if not isinstance(document, dict):
        raise NotAStripeEvent("the signed body is not a Stripe event", "body", "not an object")
    event_id = _stripe_id(document.get("id"), "id", MAX_EVENT_ID_LENGTH)
    event_type = document.get("type")
    if not isinstance(event_type, str) or not 0 < len(event_type) <= MAX_EVENT_TYPE_LENGTH:
        raise NotAStripeEvent(
            "the event has no type", "type", f"a string of 1 to {MAX_EVENT_TYPE_LENGTH} characters"
        )
    object_type: Literal["subscription", "customer"] | None = None
    object_id: str | None = None
    if event_type in HANDLED_EVENT_TYPES:
        object_type, object_id = _routed(_mapping(_mapping(document.get("data")).get("object")))
    return ProviderEvent(
        id=event_id,
        type=event_type,
        created=_created(document.get("created")),
        object_type=object_type,
        object_id=object_id,
    )


def _routed(obj: dict[str, Any]) -> tuple[Literal["subscription", "customer"] | None, str | None]:
    """The object an event of a handled type syncs: a subscription or a customer by its id,
    an invoice's subscription (none for an invoice of no subscription: nothing to sync)."""
    kind = obj.get("object")
    if kind == "subscription":
        return "subscription", _object_id(obj.get("id"), "data.object.id")
    if kind == "customer":
        return "customer", _object_id(obj.get("id"), "data.object.id")
    if kind == "invoice":
        field = "data.object.parent.subscription_details.subscription"
        details = _mapping(_mapping(obj.get("parent")).get("subscription_details"))
        subscription = details.get("subscription")
        if subscription is None:
            field = "data.object.subscription"  # API versions before 2025-03-31
            subscription = obj.get("subscription")
        if isinstance(subscription, dict):
            field = f"{field}.id"
            subscription = subscription.get("id")
        if subscription is None:
            return None, None
        return "subscription", _object_id(subscription, field)
    return None, None


def _object_id(value: Any, field: str) -> str:
    return _stripe_id(value, field, MAX_OBJECT_ID_LENGTH)


def _stripe_id(value: Any, field: str, max_length: int) -> str:
    if isinstance(value, str) and len(value) <= max_length and STRIPE_ID.fullmatch(value):
        return value
    raise NotAStripeEvent(
        f"{field} is not a Stripe id",
        field,
        f"a Stripe id: 1 to {max_length} of [A-Za-z0-9_], starting with a letter or digit",
    )


def _created(value: Any) -> datetime:
    if value is None:
        return datetime.now(UTC)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= LATEST_CREATED:
        return datetime.fromtimestamp(value, UTC)
    raise NotAStripeEvent("created is not a time", "created", "Unix seconds between 1970 and 9999")


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
