"""Ports of the events outbox and of the webhooks: what the relay and the deliveries need
from the outside world, as Protocols.

Adapters in ``worker/`` implement them (``adapters/db/events.py``, ``adapters/outbound/stream.py``,
``adapters/outbound/webhooks.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from domain.events.base import Event
from domain.provider.sync import StripeEndpoint
from domain.webhooks import DeliveryClaim, DeliveryState, WebhookDelivery, WebhookEndpoint


@dataclass(frozen=True)
class RecordedEvent:
    """An event as the outbox keeps it: its place in the outbox's order, and its document."""

    sequence: int
    id: str
    type: str
    subject_key: str
    document: dict[str, Any]


class EventOutbox(Protocol):
    """The outbox: events written in the transaction of the change that caused them."""

    def add(self, event: Event) -> None: ...

    def unpublished(self, limit: int) -> list[RecordedEvent]:
        """Up to ``limit`` events not yet published, in outbox order."""
        ...

    def mark_published(self, sequences: Sequence[int], now: datetime) -> None: ...

    def published_since(self, since: datetime, limit: int) -> list[RecordedEvent]:
        """The latest ``limit`` events published at ``since`` or later, in outbox order:
        what a Redis that lost its latest writes (a failover) or its dataset took from the
        stream, to be appended again."""
        ...

    def get(self, event_id: str) -> RecordedEvent | None: ...

    def count_unpublished(self) -> int: ...

    def prune_published(self, before: datetime, limit: int) -> int:
        """Delete up to ``limit`` events published before ``before`` that no delivery refers
        to any more, oldest first; returns how many went."""
        ...


class WebhookEndpointRepository(Protocol):
    def get(self, endpoint_id: str, *, for_update: bool = False) -> WebhookEndpoint | None: ...

    def all(self) -> list[WebhookEndpoint]: ...

    def enabled(self) -> list[WebhookEndpoint]: ...

    def add(self, endpoint: WebhookEndpoint) -> None: ...

    def save(self, endpoint: WebhookEndpoint) -> None: ...


class StripeEndpointRepository(Protocol):
    """Our endpoints at Stripe, with their signing secrets."""

    def get(self, endpoint_id: str) -> StripeEndpoint | None: ...

    def all(self) -> list[StripeEndpoint]: ...

    def add(self, endpoint: StripeEndpoint) -> None: ...

    def save(self, endpoint: StripeEndpoint) -> None: ...

    def remove(self, endpoint_id: str) -> None: ...


class WebhookDeliveryRepository(Protocol):
    def get(self, delivery_id: str, *, for_update: bool = False) -> WebhookDelivery | None: ...

    def add(self, delivery: WebhookDelivery) -> None: ...

    def save(self, delivery: WebhookDelivery) -> None: ...

    def claim_due(self, now: datetime, lease_until: datetime, limit: int) -> list[DeliveryClaim]:
        """Atomically take up to ``limit`` deliveries that are ``pending`` and due, or
        ``delivering`` with an expired lease: each becomes ``delivering`` until
        ``lease_until`` with its claim count raised. Two sweeps never take the same
        delivery."""
        ...

    def earlier_unfinished(self, delivery: WebhookDelivery) -> WebhookDelivery | None:
        """The earliest delivery of the same subject to the same endpoint, of an earlier
        event, that is neither succeeded nor failed."""
        ...

    def next_of_subject(self, delivery: WebhookDelivery) -> WebhookDelivery | None:
        """The unfinished delivery of the same subject and endpoint that comes next."""
        ...

    def unfinished_for_endpoint(self, endpoint_id: str) -> list[WebhookDelivery]: ...

    def find(
        self,
        *,
        state: DeliveryState | None = None,
        endpoint_id: str | None = None,
        event_id: str | None = None,
        limit: int = 100,
        oldest_first: bool = False,
    ) -> list[WebhookDelivery]:
        """Deliveries, newest first (or in the order of their events: ``oldest_first``)."""
        ...

    def prune_finished(self, state: DeliveryState, before: datetime, limit: int) -> int:
        """Delete up to ``limit`` deliveries that ended in ``state`` (succeeded or failed)
        before ``before``, oldest first; returns how many went."""
        ...


class EventStream(Protocol):
    """The capped Redis stream services on the platform read events from."""

    def append(self, events: Sequence[RecordedEvent]) -> None:
        """Add the events in this order; raises if they could not all be added."""
        ...


@dataclass(frozen=True)
class WebhookResponse:
    """How a receiver answered: its status (``None`` when there was no answer), its
    ``Retry-After`` in seconds, and what went wrong (``None`` for a 2xx)."""

    status: int | None
    retry_after: float | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


class WebhookSender(Protocol):
    """Posts signed events to receivers (Standard Webhooks)."""

    def send(
        self,
        url: str,
        *,
        message_id: str,
        body: bytes,
        secrets: Sequence[str],
        timeout_seconds: float,
    ) -> WebhookResponse:
        """POST ``body`` signed with each of ``secrets`` and stamped with the real time (a
        receiver refuses a timestamp far from its own clock, whatever the application's
        clock says); never raises for what the receiver or the network did (that is the
        response)."""
        ...


class RelayLock(Protocol):
    """One relay at a time, so that events of a subject are published in order."""

    def acquire(self) -> bool:
        """Take the lock if it is free (never waits). A relay that finds it taken leaves its
        work to the holder, and says so: the holder's :meth:`release` tells it."""
        ...

    def release(self) -> bool:
        """Let go; ``True`` when another relay found the lock taken meanwhile (its events,
        committed before it tried, wait for this relay to look again)."""
        ...
