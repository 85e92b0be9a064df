"""The events outbox and the webhook repositories, on SQLAlchemy."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    CursorResult,
    Row,
    Table,
    and_,
    bindparam,
    delete,
    func,
    insert,
    or_,
    select,
    update,
)
from sqlalchemy.orm import Session

from adapters.db.claims import claim_due_rows
from adapters.db.mapping import RowMapping
from adapters.db.models import (
    EventRow,
    StripeEndpointRow,
    WebhookDeliveryRow,
    WebhookEndpointRow,
)
from adapters.db.repositories import _RowRepository
from adapters.observability.tracing import COMMAND_ID, EVENT_ID, EVENT_TYPE, span
from domain.events.base import Event
from domain.ports.events import RecordedEvent
from domain.provider.sync import StripeEndpoint
from domain.webhooks import (
    DeliveryClaim,
    DeliveryState,
    EndpointState,
    WebhookDelivery,
    WebhookEndpoint,
)

_UNFINISHED = (DeliveryState.PENDING.value, DeliveryState.DELIVERING.value)


_written_here = 0


def events_written_here() -> int:
    """How many events this process has written to the outbox (committed or not): a command
    that leaves it unchanged has nothing of its own for the relay."""
    return _written_here


class SqlEventOutbox:
    def __init__(self, session: Session) -> None:
        self._session = session

    def add(self, event: Event) -> None:
        """Write ``event`` in the session's transaction now: one insert, as SQLAlchemy Core
        (through the ORM, its row cost a command about as much as the statement again at the
        flush, issue 34). A span of its own: an event the command emitted, in its trace."""
        attributes = {EVENT_ID: event.id, EVENT_TYPE: event.type}
        if event.command_id is not None:
            attributes[COMMAND_ID] = event.command_id
        with span(f"emit {event.type}", attributes):
            self._add(event)

    def _add(self, event: Event) -> None:
        global _written_here  # one count per process, only ever raised
        _written_here += 1
        self._session.execute(
            _ADD_EVENT,
            {
                "id": event.id,
                "type": event.type,
                "version": event.version,
                "subject_key": event.subject_key,
                "command_id": event.command_id,
                "occurred_at": event.occurred_at,
                "document": event.model_dump(mode="json"),
            },
        )

    def unpublished(self, limit: int) -> list[RecordedEvent]:
        rows = self._session.execute(_UNPUBLISHED, {"limit": limit}).all()
        return [_recorded(row) for row in rows]

    def mark_published(self, sequences: Sequence[int], now: datetime) -> None:
        if not sequences:
            return
        self._session.execute(_MARK_PUBLISHED, {"sequences": list(sequences), "now": now})

    def published_since(self, since: datetime, limit: int) -> list[RecordedEvent]:
        # Newest first along the published_at index, so that a day of events costs ``limit``
        # rows, not a sort of the day; then in outbox order.
        latest = self._session.scalars(
            select(EventRow)
            .where(EventRow.published_at >= since)
            .order_by(EventRow.published_at.desc(), EventRow.sequence.desc())
            .limit(limit)
        ).all()
        return [_recorded(row) for row in sorted(latest, key=lambda row: row.sequence)]

    def get(self, event_id: str) -> RecordedEvent | None:
        row = self._session.scalars(select(EventRow).where(EventRow.id == event_id)).one_or_none()
        return None if row is None else _recorded(row)

    def count_unpublished(self) -> int:
        return int(
            self._session.scalar(
                select(func.count()).select_from(EventRow).where(EventRow.published_at.is_(None))
            )
            or 0
        )

    def prune_published(self, before: datetime, limit: int) -> int:
        delivered = select(WebhookDeliveryRow.id).where(WebhookDeliveryRow.event_id == EventRow.id)
        oldest = (
            select(EventRow.sequence)
            .where(EventRow.published_at < before, ~delivered.exists())
            # The oldest first by the index on published_at: read in sequence order instead,
            # a sweep with nothing to delete would read the whole outbox.
            .order_by(EventRow.published_at)
            .limit(limit)
        )
        deleted = self._session.execute(
            delete(EventRow)
            .where(EventRow.sequence.in_(oldest))
            .execution_options(synchronize_session=False)
        )
        return cast(CursorResult[Any], deleted).rowcount


_EVENTS = cast(Table, EventRow.__table__)
# The relay's read and mark (after every few commands): SQLAlchemy Core on the table, built
# once and executed with their parameters, rather than the ORM's load of rows that are never
# changed through the session.
_ADD_EVENT = insert(_EVENTS)
_UNPUBLISHED = (
    select(
        _EVENTS.c.sequence,
        _EVENTS.c.id,
        _EVENTS.c.type,
        _EVENTS.c.subject_key,
        _EVENTS.c.document,
    )
    .where(_EVENTS.c.published_at.is_(None))
    .order_by(_EVENTS.c.sequence)
    .limit(bindparam("limit"))
)
_MARK_PUBLISHED = (
    update(_EVENTS)
    .where(
        _EVENTS.c.sequence.in_(bindparam("sequences", expanding=True)),
        _EVENTS.c.published_at.is_(None),
    )
    .values(published_at=bindparam("now"))
)


def _recorded(row: EventRow | Row[Any, Any, Any, Any, Any]) -> RecordedEvent:
    return RecordedEvent(
        sequence=row.sequence,
        id=row.id,
        type=row.type,
        subject_key=row.subject_key,
        document=dict(row.document),
    )


class SqlWebhookEndpointRepository(_RowRepository[WebhookEndpoint, WebhookEndpointRow]):
    mapping = RowMapping(WebhookEndpoint, WebhookEndpointRow)

    def get(self, endpoint_id: str, *, for_update: bool = False) -> WebhookEndpoint | None:
        return self._by_id(endpoint_id, for_update=for_update)

    def all(self) -> list[WebhookEndpoint]:
        return self._all(
            select(WebhookEndpointRow).order_by(
                WebhookEndpointRow.created_at, WebhookEndpointRow.id
            )
        )

    def enabled(self) -> list[WebhookEndpoint]:
        return self._all(
            select(WebhookEndpointRow)
            .where(WebhookEndpointRow.state == EndpointState.ENABLED.value)
            .order_by(WebhookEndpointRow.created_at, WebhookEndpointRow.id)
        )


class SqlWebhookDeliveryRepository(_RowRepository[WebhookDelivery, WebhookDeliveryRow]):
    mapping = RowMapping(WebhookDelivery, WebhookDeliveryRow)

    def get(self, delivery_id: str, *, for_update: bool = False) -> WebhookDelivery | None:
        return self._by_id(delivery_id, for_update=for_update)

    def claim_due(self, now: datetime, lease_until: datetime, limit: int) -> list[DeliveryClaim]:
        row = WebhookDeliveryRow
        claimable = or_(
            and_(row.state == DeliveryState.PENDING.value, row.next_attempt_at <= now),
            and_(row.state == DeliveryState.DELIVERING.value, row.lease_until < now),
        )
        claimed = claim_due_rows(
            self._session,
            row,
            claimable=claimable,
            order_by=(row.next_attempt_at, row.event_sequence),
            limit=limit,
            state=DeliveryState.DELIVERING.value,
            lease_until=lease_until,
            now=now,
        )
        return [DeliveryClaim(delivery_id, number) for delivery_id, number in claimed]

    def earlier_unfinished(self, delivery: WebhookDelivery) -> WebhookDelivery | None:
        row = WebhookDeliveryRow
        return self._one(
            select(row)
            .where(
                row.endpoint_id == delivery.endpoint_id,
                row.subject_key == delivery.subject_key,
                row.event_sequence < delivery.event_sequence,
                row.state.in_(_UNFINISHED),
            )
            .order_by(row.event_sequence)
            .limit(1)
        )

    def next_of_subject(self, delivery: WebhookDelivery) -> WebhookDelivery | None:
        row = WebhookDeliveryRow
        return self._one(
            select(row)
            .where(
                row.endpoint_id == delivery.endpoint_id,
                row.subject_key == delivery.subject_key,
                row.event_sequence > delivery.event_sequence,
                row.state.in_(_UNFINISHED),
            )
            .order_by(row.event_sequence)
            .limit(1)
        )

    def unfinished_for_endpoint(self, endpoint_id: str) -> list[WebhookDelivery]:
        row = WebhookDeliveryRow
        return self._all(
            select(row)
            .where(row.endpoint_id == endpoint_id, row.state.in_(_UNFINISHED))
            .order_by(row.event_sequence)
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
        row = WebhookDeliveryRow
        query = select(row)
        if state is not None:
            query = query.where(row.state == state.value)
        if endpoint_id is not None:
            query = query.where(row.endpoint_id == endpoint_id)
        if event_id is not None:
            query = query.where(row.event_id == event_id)
        order = (
            (row.event_sequence, row.id) if oldest_first else (row.created_at.desc(), row.id.desc())
        )
        return self._all(query.order_by(*order).limit(limit))

    def prune_finished(self, state: DeliveryState, before: datetime, limit: int) -> int:
        if not state.is_finished:
            raise ValueError(f"a {state.value} delivery has not finished: it is never pruned")
        row = WebhookDeliveryRow
        oldest = (
            select(row.id)
            .where(row.state == state.value, row.updated_at < before)
            .order_by(row.updated_at)
            .limit(limit)
        )
        deleted = self._session.execute(
            delete(row).where(row.id.in_(oldest)).execution_options(synchronize_session=False)
        )
        return cast(CursorResult[Any], deleted).rowcount


class SqlStripeEndpointRepository(_RowRepository[StripeEndpoint, StripeEndpointRow]):
    mapping = RowMapping(StripeEndpoint, StripeEndpointRow)

    def get(self, endpoint_id: str) -> StripeEndpoint | None:
        return self._by_id(endpoint_id)

    def all(self) -> list[StripeEndpoint]:
        return self._all(select(StripeEndpointRow).order_by(StripeEndpointRow.created_at))

    def remove(self, endpoint_id: str) -> None:
        self._session.execute(delete(StripeEndpointRow).where(StripeEndpointRow.id == endpoint_id))
