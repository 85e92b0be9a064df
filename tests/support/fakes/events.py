"""In-memory fakes of the event ports: the outbox and the webhook repositories (tables of
the :class:`tests.support.fakes.database.FakeDatabase`, so that they commit and roll back with the
handler's transaction), the Redis stream, the webhook sender and the relay's lock.

They mirror ``adapters/db/events.py``, ``adapters/outbound/stream.py`` and
``adapters/outbound/webhooks.py``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from domain.events.base import Event
from domain.ports.events import RecordedEvent, WebhookResponse
from domain.provider.sync import StripeEndpoint
from domain.webhooks import DeliveryClaim, DeliveryState, WebhookDelivery, WebhookEndpoint

if TYPE_CHECKING:
    from tests.support.fakes.database import Transaction

_UNFINISHED = (DeliveryState.PENDING, DeliveryState.DELIVERING)


@dataclass
class StoredEvent:
    """An outbox row."""

    id: str
    sequence: int
    type: str
    subject_key: str
    document: dict[str, Any]
    published_at: datetime | None = None

    def recorded(self) -> RecordedEvent:
        return RecordedEvent(self.sequence, self.id, self.type, self.subject_key, self.document)


class FakeEventOutbox:
    table = "events"

    def __init__(self, tx: Transaction) -> None:
        self._tx = tx

    def add(self, event: Event) -> None:
        # As a database sequence: taken at insert, never given back (a rollback leaves a gap).
        sequence = next(self._tx.db.sequence)
        self._tx.db.events_written += 1
        stored = StoredEvent(
            event.id, sequence, event.type, event.subject_key, event.model_dump(mode="json")
        )
        self._tx.write(self.table, stored, insert=True)

    def _rows(self) -> Iterator[StoredEvent]:
        yield from sorted(self._tx.scan(self.table), key=lambda row: row.sequence)

    def unpublished(self, limit: int) -> list[RecordedEvent]:
        rows = [row for row in self._rows() if row.published_at is None]
        return [row.recorded() for row in rows[:limit]]

    def mark_published(self, sequences: Sequence[int], now: datetime) -> None:
        wanted = set(sequences)
        for row in self._rows():
            if row.sequence in wanted and row.published_at is None:
                row.published_at = now
                self._tx.write(self.table, row)

    def published_since(self, since: datetime, limit: int) -> list[RecordedEvent]:
        rows = [row for row in self._rows() if row.published_at and row.published_at >= since]
        newest_last = sorted(rows, key=lambda row: (row.published_at, row.sequence))
        latest = newest_last[-limit:] if limit > 0 else []
        return [row.recorded() for row in sorted(latest, key=lambda row: row.sequence)]

    def get(self, event_id: str) -> RecordedEvent | None:
        row: StoredEvent | None = self._tx.read(self.table, event_id)
        return None if row is None else row.recorded()

    def count_unpublished(self) -> int:
        return sum(1 for row in self._rows() if row.published_at is None)

    def prune_published(self, before: datetime, limit: int) -> int:
        delivered = {delivery.event_id for delivery in self._tx.scan("webhook_deliveries")}
        old = [
            row
            for row in self._rows()
            if row.published_at is not None
            and row.published_at < before
            and row.id not in delivered
        ][:limit]
        for row in old:
            self._tx.delete(self.table, row.id)
        return len(old)


class FakeWebhookEndpointRepository:
    table = "webhook_endpoints"

    def __init__(self, tx: Transaction) -> None:
        self._tx = tx

    def get(self, endpoint_id: str, *, for_update: bool = False) -> WebhookEndpoint | None:
        found: WebhookEndpoint | None = self._tx.read(self.table, endpoint_id)
        return found

    def all(self) -> list[WebhookEndpoint]:
        return sorted(self._tx.scan(self.table), key=lambda row: (row.created_at, row.id))

    def enabled(self) -> list[WebhookEndpoint]:
        return [endpoint for endpoint in self.all() if endpoint.is_enabled]

    def add(self, endpoint: WebhookEndpoint) -> None:
        self._tx.write(self.table, endpoint, insert=True)

    def save(self, endpoint: WebhookEndpoint) -> None:
        self._tx.write(self.table, endpoint, insert=self.get(endpoint.id) is None)


class FakeStripeEndpointRepository:
    table = "stripe_endpoints"

    def __init__(self, tx: Transaction) -> None:
        self._tx = tx

    def get(self, endpoint_id: str) -> StripeEndpoint | None:
        found: StripeEndpoint | None = self._tx.read(self.table, endpoint_id)
        return found

    def all(self) -> list[StripeEndpoint]:
        return sorted(self._tx.scan(self.table), key=lambda row: row.created_at)

    def add(self, endpoint: StripeEndpoint) -> None:
        self._tx.write(self.table, endpoint, insert=True)

    def save(self, endpoint: StripeEndpoint) -> None:
        self._tx.write(self.table, endpoint, insert=self.get(endpoint.id) is None)

    def remove(self, endpoint_id: str) -> None:
        self._tx.delete(self.table, endpoint_id)


class FakeWebhookDeliveryRepository:
    table = "webhook_deliveries"

    def __init__(self, tx: Transaction) -> None:
        self._tx = tx

    def _all(self) -> list[WebhookDelivery]:
        return list(self._tx.scan(self.table))

    def get(self, delivery_id: str, *, for_update: bool = False) -> WebhookDelivery | None:
        found: WebhookDelivery | None = self._tx.read(self.table, delivery_id)
        return found

    def add(self, delivery: WebhookDelivery) -> None:
        self._tx.write(self.table, delivery, insert=True)

    def save(self, delivery: WebhookDelivery) -> None:
        self._tx.write(self.table, delivery, insert=self.get(delivery.id) is None)

    def claim_due(self, now: datetime, lease_until: datetime, limit: int) -> list[DeliveryClaim]:
        def claimable(delivery: WebhookDelivery) -> bool:
            if delivery.state is DeliveryState.PENDING:
                return delivery.next_attempt_at <= now
            return (
                delivery.state is DeliveryState.DELIVERING
                and delivery.lease_until is not None
                and delivery.lease_until < now
            )

        due = sorted(
            (delivery for delivery in self._all() if claimable(delivery)),
            key=lambda delivery: (delivery.next_attempt_at, delivery.event_sequence),
        )[:limit]
        claims = []
        for delivery in due:
            taken = dataclasses.replace(
                delivery,
                state=DeliveryState.DELIVERING,
                claims=delivery.claims + 1,
                lease_until=lease_until,
                updated_at=now,
            )
            self._tx.write(self.table, taken)
            claims.append(DeliveryClaim(taken.id, taken.claims))
        return claims

    def _same_line(self, delivery: WebhookDelivery) -> list[WebhookDelivery]:
        return sorted(
            (
                other
                for other in self._all()
                if other.endpoint_id == delivery.endpoint_id
                and other.subject_key == delivery.subject_key
                and other.state in _UNFINISHED
            ),
            key=lambda other: other.event_sequence,
        )

    def earlier_unfinished(self, delivery: WebhookDelivery) -> WebhookDelivery | None:
        earlier = [
            other
            for other in self._same_line(delivery)
            if other.event_sequence < delivery.event_sequence
        ]
        return earlier[0] if earlier else None

    def next_of_subject(self, delivery: WebhookDelivery) -> WebhookDelivery | None:
        later = [
            other
            for other in self._same_line(delivery)
            if other.event_sequence > delivery.event_sequence
        ]
        return later[0] if later else None

    def unfinished_for_endpoint(self, endpoint_id: str) -> list[WebhookDelivery]:
        return sorted(
            (
                delivery
                for delivery in self._all()
                if delivery.endpoint_id == endpoint_id and delivery.state in _UNFINISHED
            ),
            key=lambda delivery: delivery.event_sequence,
        )

    def find(
        self,
        *,
        state: DeliveryState | None = None,
        endpoint_id: str | None = None,
        event_id: str | None = None,
        limit: int = 100,
        oldest_first: bool = False,
    ) -> list[WebhookDelivery]:
        found = [
            delivery
            for delivery in self._all()
            if (state is None or delivery.state is state)
            and (endpoint_id is None or delivery.endpoint_id == endpoint_id)
            and (event_id is None or delivery.event_id == event_id)
        ]
        if oldest_first:
            found.sort(key=lambda delivery: (delivery.event_sequence, delivery.id))
        else:
            found.sort(key=lambda delivery: (delivery.created_at, delivery.id), reverse=True)
        return found[:limit]

    def prune_finished(self, state: DeliveryState, before: datetime, limit: int) -> int:
        if not state.is_finished:
            raise ValueError(f"a {state.value} delivery has not finished: it is never pruned")
        old = sorted(
            (
                delivery
                for delivery in self._all()
                if delivery.state is state and delivery.updated_at < before
            ),
            key=lambda delivery: delivery.updated_at,
        )[:limit]
        for delivery in old:
            self._tx.delete(self.table, delivery.id)
        return len(old)


class FakeEventStream:
    """The Redis stream: what was appended, in order; failures scripted."""

    def __init__(self) -> None:
        self.entries: list[RecordedEvent] = []
        self._failures: list[Exception] = []

    def fail_next(self, error: Exception, *, times: int = 1) -> None:
        self._failures.extend([error] * times)

    def append(self, events: Sequence[RecordedEvent]) -> None:
        if self._failures:
            raise self._failures.pop(0)
        self.entries.extend(events)

    @property
    def types(self) -> list[str]:
        return [entry.type for entry in self.entries]


@dataclass(frozen=True)
class SentWebhook:
    url: str
    message_id: str
    body: bytes
    secrets: tuple[str, ...]


class FakeWebhookSender:
    """Receivers that answer 200 unless a test scripts other answers, per URL."""

    def __init__(self) -> None:
        self.sent: list[SentWebhook] = []
        self._answers: dict[str, list[WebhookResponse]] = {}

    def answer(self, url: str, *responses: WebhookResponse) -> None:
        self._answers.setdefault(url, []).extend(responses)

    def send(
        self,
        url: str,
        *,
        message_id: str,
        body: bytes,
        secrets: Sequence[str],
        timeout_seconds: float,
    ) -> WebhookResponse:
        self.sent.append(SentWebhook(url, message_id, body, tuple(secrets)))
        scripted = self._answers.get(url)
        if scripted:
            return scripted.pop(0)
        return WebhookResponse(status=200)


class FakeRelayLock:
    """As ``RedisRelayLock``: a relay that finds it held leaves a note for the holder."""

    def __init__(self) -> None:
        self.held = False
        self.wanted = False

    def acquire(self) -> bool:
        if self.held:
            self.wanted = True
            return False
        self.held = True
        self.wanted = False
        return True

    def release(self) -> bool:
        self.held = False
        wanted, self.wanted = self.wanted, False
        return wanted
