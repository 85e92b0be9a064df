"""Webhook endpoints and their deliveries.

An endpoint is a URL that receives the events it subscribed to, signed with its own secret
(Standard Webhooks). Each event an endpoint wants becomes one delivery: a row that is
attempted until the receiver answers 2xx, retried with backoff and jitter for a budget of
about a day, and then failed; an endpoint whose delivery fails for the whole budget is
disabled with the reason recorded. A failed delivery can be replayed.

Deliveries of one subject (``domain.events.base.Subject``) to one endpoint go in the order
their events happened: a delivery waits while an earlier one of its subject is unfinished.
"""

from __future__ import annotations

import base64
import ipaddress
import secrets
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

from pydantic import Field, StrictInt

from domain.errors import FailedPrecondition, InvalidArgument, error_info
from domain.events.catalog import EVENT_TYPES
from domain.messages import Message, ResourceId
from domain.rules import new_id

SECRET_PREFIX = "whsec_"  # noqa: S105 (the format's prefix, not a secret)
ALL_EVENTS = "*"


def new_secret() -> str:
    """A signing secret as Standard Webhooks writes them: ``whsec_`` and 32 random bytes in
    base64."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def checked_url(url: str, *, allow_private_networks: bool = False) -> str:
    """An ``http``/``https`` URL with a host, at most 2,048 characters; unless
    ``allow_private_networks``, not ``localhost`` nor an address that is not public (the
    sender checks names once resolved, at each attempt)."""
    parts = urlsplit(url.strip())
    if len(url) > 2048 or parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidArgument.for_fields(
            f"{url[:100]!r} is not an http(s) URL", [("url", "must be an http or https URL")]
        )
    try:
        parts.port  # noqa: B018 (reading it checks it: 0-65535, digits)
    except ValueError:
        raise InvalidArgument.for_fields(
            f"{url[:100]!r} has no valid port", [("url", "the port must be 0 to 65535")]
        ) from None
    if parts.username is not None or parts.password is not None:
        raise InvalidArgument.for_fields(
            "the URL holds credentials (user:password@), which would be shown and logged",
            [("url", "must not hold credentials; authenticate with the signature")],
        )
    if not allow_private_networks and is_private_host(parts.hostname):
        raise InvalidArgument.for_fields(
            f"{parts.hostname!r} is not a public address; receivers on private networks "
            "need BILLING_WEBHOOK_ALLOW_PRIVATE_NETWORKS=true",
            [("url", "must name a public host")],
        )
    return url.strip()


def is_private_host(host: str) -> bool:
    """Whether ``host`` is ``localhost`` or an IP address that is not globally routable
    (loopback, private, link-local such as the cloud metadata address, reserved…). Other
    names are not resolved here."""
    name = host.strip("[]").lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        # A bare number is an IPv4 address to resolvers (http://2130706433/ is 127.0.0.1).
        address = ipaddress.ip_address(int(name) if name.isascii() and name.isdigit() else name)
    except ValueError:
        return False
    return not address.is_global


def checked_event_types(names: list[str]) -> list[str]:
    """Catalog event types (or ``*`` for all), each once, in the order given."""
    unknown = [name for name in names if name != ALL_EVENTS and name not in EVENT_TYPES]
    if unknown:
        raise InvalidArgument.for_fields(
            f"unknown event type {unknown[0]!r}; known: {', '.join(EVENT_TYPES)}",
            [("events", f"{unknown[0]!r} is not an event type")],
        )
    unique = list(dict.fromkeys(names))
    return unique or [ALL_EVENTS]


class EndpointState(StrEnum):
    ENABLED = "enabled"
    DISABLED = "disabled"


@dataclass
class WebhookEndpoint:
    id: str
    url: str
    event_types: list[str]
    secret: str
    state: EndpointState
    created_at: datetime
    updated_at: datetime
    description: str = ""
    disabled_reason: str | None = None
    disabled_at: datetime | None = None
    previous_secret: str | None = None
    previous_secret_expires_at: datetime | None = None

    @classmethod
    def new(
        cls,
        url: str,
        event_types: list[str],
        now: datetime,
        *,
        description: str = "",
        allow_private_networks: bool = True,
    ) -> WebhookEndpoint:
        """A new enabled endpoint. Callers that take URLs from operators pass their
        ``allow_private_networks`` setting."""
        return cls(
            id=new_id("we"),
            url=checked_url(url, allow_private_networks=allow_private_networks),
            event_types=checked_event_types(event_types),
            secret=new_secret(),
            state=EndpointState.ENABLED,
            created_at=now,
            updated_at=now,
            description=description[:255],
        )

    @property
    def is_enabled(self) -> bool:
        return self.state is EndpointState.ENABLED

    def wants(self, event_type: str) -> bool:
        return ALL_EVENTS in self.event_types or event_type in self.event_types

    def signing_secrets(self, now: datetime) -> list[str]:
        """The secrets a delivery is signed with: the current one, and the previous one
        during the grace period after a rotation (receivers verify either)."""
        keys = [self.secret]
        if (
            self.previous_secret is not None
            and self.previous_secret_expires_at is not None
            and now < self.previous_secret_expires_at
        ):
            keys.append(self.previous_secret)
        return keys

    def rotate_secret(self, now: datetime, grace: timedelta) -> str:
        """A new secret; the old one still signs (beside it) for ``grace``."""
        self.previous_secret = self.secret
        self.previous_secret_expires_at = now + grace
        self.secret = new_secret()
        self.updated_at = now
        return self.secret

    def disable(self, reason: str, now: datetime) -> bool:
        if not self.is_enabled:
            return False
        self.state = EndpointState.DISABLED
        self.disabled_reason = reason[:1000]
        self.disabled_at = now
        self.updated_at = now
        return True

    def enable(self, now: datetime) -> bool:
        if self.is_enabled:
            return False
        self.state = EndpointState.ENABLED
        self.disabled_reason = None
        self.disabled_at = None
        self.updated_at = now
        return True

    def to_view(self) -> dict[str, Any]:
        """What operators are shown: never the secret."""
        return {
            "id": self.id,
            "url": self.url,
            "events": list(self.event_types),
            "description": self.description,
            "state": self.state.value,
            "disabled_reason": self.disabled_reason,
            "disabled_at": self.disabled_at.isoformat() if self.disabled_at else None,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
        }


class DeliveryMessage(Message):
    """The ``webhooks.deliver`` task's keyword arguments (published by the relay and the
    sweep; anything else on the queue under that name is refused)."""

    delivery_id: ResourceId
    claim: StrictInt = Field(ge=1)


@dataclass(frozen=True)
class DeliveryClaim:
    """A delivery taken for an attempt: its id and the claim's number (a fencing token)."""

    delivery_id: str
    number: int


class DeliveryState(StrEnum):
    PENDING = "pending"
    """Waiting for its next attempt (``next_attempt_at``)."""
    DELIVERING = "delivering"
    """Taken by a worker until ``lease_until`` (taken again after, if the worker died)."""
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    """Given up (budget spent, or the endpoint disabled); can be replayed."""

    @property
    def is_finished(self) -> bool:
        return self in (DeliveryState.SUCCEEDED, DeliveryState.FAILED)


@dataclass(frozen=True)
class DeliveryPolicy:
    """How deliveries are retried: exponential backoff with full jitter between
    ``base_delay`` and ``max_delay``, for ``budget`` after the first attempt."""

    base_delay: timedelta
    max_delay: timedelta
    budget: timedelta
    lease: timedelta
    timeout: timedelta
    """Of one HTTP request."""


@dataclass
class WebhookDelivery:
    id: str
    event_id: str
    event_type: str
    event_sequence: int
    """The event's place in the outbox: deliveries of a subject go in this order."""
    subject_key: str
    endpoint_id: str
    state: DeliveryState
    next_attempt_at: datetime
    created_at: datetime
    updated_at: datetime
    attempts: int = 0
    claims: int = 0
    """How many times a relay or a sweep took it: the fencing token of its messages (a
    message whose claim is not the latest is stale, and does nothing)."""
    first_attempt_at: datetime | None = None
    lease_until: datetime | None = None
    last_attempt_at: datetime | None = None
    last_status: int | None = None
    last_error: str | None = None
    delivered_at: datetime | None = None
    history: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def of(
        cls,
        event_id: str,
        event_type: str,
        sequence: int,
        subject_key: str,
        endpoint_id: str,
        now: datetime,
    ) -> WebhookDelivery:
        return cls(
            id=new_id("whd"),
            event_id=event_id,
            event_type=event_type,
            event_sequence=sequence,
            subject_key=subject_key,
            endpoint_id=endpoint_id,
            state=DeliveryState.PENDING,
            next_attempt_at=now,
            created_at=now,
            updated_at=now,
        )

    def claim(self, now: datetime, lease: timedelta) -> int:
        """Take it for an attempt until the lease ends; returns the claim's number."""
        self.state = DeliveryState.DELIVERING
        self.claims += 1
        self.lease_until = now + lease
        self.updated_at = now
        return self.claims

    def holds(self, claim: int) -> bool:
        """Whether a message of claim ``claim`` is the delivery's current one. Its lease may
        have run out while the message waited in a busy queue: as long as no sweep took the
        delivery since (which raises the claim), the message may still attempt it."""
        return self.state is DeliveryState.DELIVERING and self.claims == claim

    def renew(self, now: datetime, lease: timedelta) -> None:
        """The attempt starts: the lease runs from now."""
        self.lease_until = now + lease
        self.updated_at = now

    def succeeded(self, status: int, now: datetime) -> None:
        self._attempted(now, status, None)
        self.state = DeliveryState.SUCCEEDED
        self.delivered_at = now
        self.lease_until = None

    def attempt_failed(
        self, status: int | None, error: str, now: datetime, retry_at: datetime, budget: timedelta
    ) -> bool:
        """Record a failed attempt; retry at ``retry_at`` unless that is past the budget
        (counted from the first attempt). Returns whether the delivery is given up."""
        self._attempted(now, status, error)
        self.lease_until = None
        assert self.first_attempt_at is not None
        if retry_at - self.first_attempt_at > budget:
            self.state = DeliveryState.FAILED
            return True
        self.state = DeliveryState.PENDING
        self.next_attempt_at = retry_at
        return False

    def postpone(self, until: datetime, now: datetime) -> None:
        """Wait for an earlier delivery of the subject (not an attempt: no budget used)."""
        self.state = DeliveryState.PENDING
        self.next_attempt_at = until
        self.lease_until = None
        self.updated_at = now

    def abandon(self, reason: str, now: datetime) -> None:
        """Give up without an attempt (the endpoint was disabled)."""
        self.state = DeliveryState.FAILED
        self.last_error = reason[:1000]
        self.lease_until = None
        self.updated_at = now

    def replay(self, now: datetime) -> None:
        """A failed delivery goes again, with a whole new budget."""
        if self.state is not DeliveryState.FAILED:
            raise FailedPrecondition(
                f"delivery {self.id!r} is {self.state.value}; only failed deliveries replay",
                details=[error_info("DELIVERY_NOT_FAILED", delivery_id=self.id)],
            )
        self.state = DeliveryState.PENDING
        self.next_attempt_at = now
        self.first_attempt_at = None
        self.attempts = 0
        self.updated_at = now

    def _attempted(self, now: datetime, status: int | None, error: str | None) -> None:
        self.attempts += 1
        self.first_attempt_at = self.first_attempt_at or now
        self.last_attempt_at = now
        self.last_status = status
        self.last_error = None if error is None else error[:1000]
        self.updated_at = now
        # The last attempts, for operators (bounded: a day of retries is a few dozen).
        self.history = [
            *self.history[-19:],
            {"at": now.isoformat(), "status": status, "error": self.last_error},
        ]

    def to_view(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "event_id": self.event_id,
            "event_type": self.event_type,
            "endpoint_id": self.endpoint_id,
            "subject": self.subject_key,
            "state": self.state.value,
            "attempts": self.attempts,
            "next_attempt_at": self.next_attempt_at.isoformat(),
            "last_status": self.last_status,
            "last_error": self.last_error,
            "delivered_at": self.delivered_at.isoformat() if self.delivered_at else None,
            "created_at": self.created_at.isoformat(),
        }
