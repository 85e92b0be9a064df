"""The audit trail's writing: an operator's action runs with a context whose units of work
write its :class:`~domain.operations.audit.AuditEntry` (and its ``operator.action_taken``
event) in the first transaction the action commits, beside what it changed, so that neither
is there without the other. An action that commits none (a replay through the command log, a
dead letter put back on its queue: what they change is not in a unit of work) has its entry
written by :func:`application.operator_actions.take` once it is done.

Only ``application/operator_actions.py`` uses this module.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import TracebackType
from typing import Self

from domain.events.base import Event
from domain.events.operator_actions import OperatorActionTaken
from domain.operations.audit import AuditEntry, AuditTrail
from domain.ports.application import Clock, OperatorContext, StackClock
from domain.ports.commands import CommandJournal, CommandPublisher, DeadLetterStore
from domain.ports.events import (
    EventOutbox,
    RecordedEvent,
    StripeEndpointRepository,
    WebhookDeliveryRepository,
    WebhookEndpointRepository,
)
from domain.ports.provider import BillingPolicy, BillingProvider
from domain.ports.repositories import (
    BillingAccountRepository,
    ChangePreviewRepository,
    OrganizationRepository,
    PlanRepository,
    ProviderWalkRepository,
    RenewalCheckRepository,
    ScheduledChangeRepository,
    SubscriptionRepository,
    UnitOfWork,
    UserRepository,
)


@dataclass
class PendingEntry:
    """An action's entry before it is written: who, when, why and what it targets; what it
    changed and whose account it concerns are learnt from the transaction it is written in."""

    id: str
    action: str
    operator: str
    surface: str
    at: datetime
    reason: str
    targets: tuple[str, ...]
    billing_account_id: str | None = None
    written: AuditEntry | None = field(default=None)

    def write(
        self, uow: UnitOfWork, changes: Sequence[str], account_id: str | None = None
    ) -> AuditEntry:
        """Add the entry and its event to ``uow`` (committed by the caller)."""
        entry = AuditEntry(
            id=self.id,
            action=self.action,
            operator=self.operator,
            surface=self.surface,
            at=self.at,
            reason=self.reason,
            targets=list(self.targets),
            billing_account_id=self.billing_account_id or account_id,
            changes=list(changes),
        )
        uow.audit.add(entry)
        uow.events.add(OperatorActionTaken.of(entry))
        return entry


def change_line(event: Event) -> str:
    """What an event says was changed, one line: ``billing_account.marked_offline
    billing_account:ba_1``."""
    return f"{event.type} {event.subject_key}"


def account_of(events: Sequence[Event], uow: UnitOfWork) -> str | None:
    """The billing account the events concern: their account's, or their subscription's."""
    for event in events:
        if event.subject.type == "billing_account":
            return event.subject.id
        account_id = getattr(event.data, "billing_account_id", None)
        if isinstance(account_id, str):
            return account_id
    for event in events:
        if event.subject.type == "subscription":
            subscription = uow.subscriptions.get(event.subject.id)
            if subscription is not None:
                return subscription.billing_account_id
    return None


class _RecordingOutbox:
    """The outbox, remembering the events added (what the action changed)."""

    def __init__(self, outbox: EventOutbox) -> None:
        self._outbox = outbox
        self.added: list[Event] = []

    def add(self, event: Event) -> None:
        self._outbox.add(event)
        self.added.append(event)

    def unpublished(self, limit: int) -> list[RecordedEvent]:
        return self._outbox.unpublished(limit)

    def mark_published(self, sequences: Sequence[int], now: datetime) -> None:
        self._outbox.mark_published(sequences, now)

    def published_since(self, since: datetime, limit: int) -> list[RecordedEvent]:
        return self._outbox.published_since(since, limit)

    def get(self, event_id: str) -> RecordedEvent | None:
        return self._outbox.get(event_id)

    def count_unpublished(self) -> int:
        return self._outbox.count_unpublished()

    def prune_published(self, before: datetime, limit: int) -> int:
        return self._outbox.prune_published(before, limit)


class AuditedUnitOfWork:
    """A unit of work whose first commit writes the pending entry with what it changed."""

    def __init__(self, inner: UnitOfWork, pending: PendingEntry) -> None:
        self._inner = inner
        self._pending = pending
        self._events: _RecordingOutbox | None = None

    def __enter__(self) -> Self:
        # The repositories are the inner unit of work's once it is entered (a SQL one opens
        # its session there).
        self._inner = self._inner.__enter__()
        self._events = _RecordingOutbox(self._inner.events)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._inner.__exit__(exc_type, exc, tb)

    def commit(self) -> None:
        pending = self._pending
        if pending.written is not None:
            self._inner.commit()
            return
        added = [] if self._events is None else list(self._events.added)
        entry = pending.write(
            self._inner, [change_line(event) for event in added], account_of(added, self._inner)
        )
        self._inner.commit()
        pending.written = entry

    def rollback(self) -> None:
        if self._events is not None:
            self._events.added.clear()
        self._inner.rollback()

    @property
    def events(self) -> EventOutbox:
        if self._events is None:
            raise RuntimeError("the unit of work is used before it is entered")
        return self._events

    @property
    def users(self) -> UserRepository:
        return self._inner.users

    @property
    def organizations(self) -> OrganizationRepository:
        return self._inner.organizations

    @property
    def billing_accounts(self) -> BillingAccountRepository:
        return self._inner.billing_accounts

    @property
    def plans(self) -> PlanRepository:
        return self._inner.plans

    @property
    def subscriptions(self) -> SubscriptionRepository:
        return self._inner.subscriptions

    @property
    def scheduled_changes(self) -> ScheduledChangeRepository:
        return self._inner.scheduled_changes

    @property
    def change_previews(self) -> ChangePreviewRepository:
        return self._inner.change_previews

    @property
    def renewal_checks(self) -> RenewalCheckRepository:
        return self._inner.renewal_checks

    @property
    def webhook_endpoints(self) -> WebhookEndpointRepository:
        return self._inner.webhook_endpoints

    @property
    def webhook_deliveries(self) -> WebhookDeliveryRepository:
        return self._inner.webhook_deliveries

    @property
    def stripe_endpoints(self) -> StripeEndpointRepository:
        return self._inner.stripe_endpoints

    @property
    def provider_walks(self) -> ProviderWalkRepository:
        return self._inner.provider_walks

    @property
    def audit(self) -> AuditTrail:
        return self._inner.audit


class AuditedContext:
    """The operator's context, its units of work audited (:class:`AuditedUnitOfWork`)."""

    def __init__(self, inner: OperatorContext, pending: PendingEntry) -> None:
        self._inner = inner
        self.pending = pending

    @property
    def clock(self) -> Clock:
        return self._inner.clock

    @property
    def billing(self) -> BillingPolicy:
        return self._inner.billing

    def unit_of_work(self) -> UnitOfWork:
        return AuditedUnitOfWork(self._inner.unit_of_work(), self.pending)

    def billing_provider(self) -> BillingProvider:
        return self._inner.billing_provider()

    def publisher(self) -> CommandPublisher:
        return self._inner.publisher()

    @property
    def commands(self) -> CommandJournal:
        return self._inner.commands

    def dead_letters(self) -> DeadLetterStore:
        return self._inner.dead_letters()

    def replay_dead_letter(self, letter_id: str) -> str:
        return self._inner.replay_dead_letter(letter_id)

    def rotate_client_secret(self, client_id: str) -> str:
        return self._inner.rotate_client_secret(client_id)

    def stack_clock(self) -> StackClock:
        return self._inner.stack_clock()
