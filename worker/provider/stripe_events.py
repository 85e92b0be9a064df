"""A Stripe event routed to the object it names, which the sync then reads again at Stripe
(the event's copy of the object is never trusted: it may be stale or out of order)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from domain.provider_sync import ProviderEvent


class NotAStripeEvent(ValueError):
    """A verified body that is not a Stripe event."""


def event_of(document: Any) -> ProviderEvent:
    """Route a Stripe event: the object it names, re-read by the sync."""
    if not isinstance(document, dict) or not isinstance(document.get("id"), str):
        raise NotAStripeEvent("the signed body is not a Stripe event")
    event_type = str(document.get("type", ""))
    data = _mapping(document.get("data"))
    obj = _mapping(data.get("object"))
    kind = obj.get("object")
    object_type: Literal["subscription", "customer"] | None = None
    object_id: str | None = None
    if kind == "subscription":
        object_type, object_id = "subscription", _text(obj.get("id"))
    elif kind == "customer":
        object_type, object_id = "customer", _text(obj.get("id"))
    elif kind == "invoice":
        details = _mapping(_mapping(obj.get("parent")).get("subscription_details"))
        subscription = details.get("subscription")
        if subscription is None:
            subscription = obj.get("subscription")  # API versions before 2025-03-31
        if isinstance(subscription, dict):
            subscription = subscription.get("id")
        if subscription:
            object_type, object_id = "subscription", _text(subscription)
    created = document.get("created")
    return ProviderEvent(
        id=str(document["id"]),
        type=event_type,
        created=(
            datetime.fromtimestamp(created, UTC) if isinstance(created, int) else datetime.now(UTC)
        ),
        object_type=object_type,
        object_id=object_id,
    )


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
