"""Domain events: what happened, past tense, as the rest of the platform is told of it.

Each event is written to the outbox in the transaction of the state change that caused it
(``UnitOfWork.events``), then published onto the Redis stream and delivered to webhook
endpoints. Events are the outgoing half of the versioned contract, beside the commands: a
field is never removed or retyped within a version, and a receiver must ignore fields it does
not know.

Events carry ids, states, plan ids, timestamps and error bodies; never personal data (no
name, email, phone, address or tax id). A receiver that needs those reads them through the
API, which checks its permissions. Error bodies are masked (``domain.redaction``) as a
provider's message may quote what was sent.

Every event has a ``subject``: the resource whose history it belongs to. Events of one subject
are published in the order they happened.

This module is the catalog: every event type by name, and an event read back from its JSON
form. The envelope is ``domain.events.base``; each aggregate's events are in a module of
their own (``domain.events.billing_accounts``, ``domain.events.users``,
``domain.events.subscriptions``, ``domain.events.commands``, ``domain.events.operator_actions``).
"""

from __future__ import annotations

from typing import Any

from domain.events.base import Event
from domain.events.billing_accounts import (
    BillingAccountCreated,
    BillingAccountCustomerDeleted,
    BillingAccountMarkedOffline,
    BillingAccountRegistered,
    BillingAccountRegistrationFailed,
    BillingAccountRegistrationRetried,
)
from domain.events.commands import CommandFailedEvent, CommandRejectedEvent, CommandRetryRequested
from domain.events.operator_actions import OperatorActionTaken
from domain.events.subscriptions import (
    PlanChangeApplied,
    PlanChangeAwaitingPayment,
    PlanChangeCanceled,
    PlanChangeReplaced,
    PlanChangeScheduled,
    PlanChangeSkipped,
    SubscriptionPlanChanged,
    SubscriptionSynced,
)
from domain.events.users import UserEnabledEvent

EVENT_TYPES: dict[str, type[Event]] = {
    kind.TYPE: kind
    for kind in (
        BillingAccountCreated,
        BillingAccountRegistered,
        BillingAccountRegistrationFailed,
        BillingAccountCustomerDeleted,
        BillingAccountRegistrationRetried,
        BillingAccountMarkedOffline,
        UserEnabledEvent,
        PlanChangeScheduled,
        PlanChangeReplaced,
        PlanChangeCanceled,
        PlanChangeApplied,
        PlanChangeSkipped,
        PlanChangeAwaitingPayment,
        SubscriptionPlanChanged,
        SubscriptionSynced,
        CommandFailedEvent,
        CommandRetryRequested,
        CommandRejectedEvent,
        OperatorActionTaken,
    )
}
"""The catalog: every event type, by name."""


def parse_event(document: dict[str, Any]) -> Event:
    """An event read back from its JSON form (the outbox's row, a stream entry)."""
    kind = EVENT_TYPES[str(document["type"])]
    return kind.model_validate(document)
