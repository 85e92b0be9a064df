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
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, ClassVar, Literal, Self

from pydantic import AwareDatetime, Field

from domain.billing import BillingAccount
from domain.messages import Message
from domain.redaction import redact
from domain.scheduled_changes import ChangeKind, ChangeState, ScheduledChange
from domain.subscriptions import Subscription
from domain.users import User

EVENT_ID_PREFIX = "evt_"


def new_event_id() -> str:
    """A fresh event id, such as ``evt_0b6e…`` (also the ``webhook-id`` of its deliveries)."""
    return EVENT_ID_PREFIX + uuid.uuid4().hex


class Subject(Message):
    """The resource an event belongs to: its events are delivered in order."""

    type: Literal["billing_account", "user", "subscription", "command"]
    id: str


class Event(Message):
    """The envelope every event shares. ``type`` and ``version`` name its schema."""

    TYPE: ClassVar[str]
    VERSION: ClassVar[int] = 1

    id: str = Field(
        default_factory=new_event_id,
        pattern=r"^evt_[0-9a-f]{32}$",
        description="Unique; the webhook-id of its deliveries.",
    )
    type: str
    version: Literal[1] = 1
    occurred_at: AwareDatetime
    command_id: str | None = Field(
        description="The command that caused it (beat's apply commands for due changes)."
    )
    subject: Subject
    data: Any

    @property
    def subject_key(self) -> str:
        """``type:id`` of the subject: the order key of the outbox."""
        return f"{self.subject.type}:{self.subject.id}"


# --- billing accounts --------------------------------------------------------------------------


class BillingAccountData(Message):
    billing_account_id: str
    org_id: str
    state: str = Field(
        description="pending, active or disabled; removed when a refused registration "
        "removed a pending account (billing_account.registration_failed)."
    )
    offline: bool = Field(description="Whether it is not (yet) known to the provider.")
    currency: str
    provider: str | None = None
    provider_customer_id: str | None = None


class BillingAccountRegistrationFailedData(BillingAccountData):
    error: dict[str, Any] = Field(description="The error body (personal data masked).")


def _account_data(account: BillingAccount) -> dict[str, Any]:
    return {
        "billing_account_id": account.id,
        "org_id": account.org_id,
        "state": account.state.value,
        "offline": not account.is_registered,
        "currency": account.currency,
        "provider": account.provider,
        "provider_customer_id": account.provider_id,
    }


def _account_subject(account: BillingAccount) -> Subject:
    return Subject(type="billing_account", id=account.id)


class _BillingAccountEvent(Event):
    data: BillingAccountData

    @classmethod
    def of(cls, account: BillingAccount, *, command_id: str | None, now: datetime) -> Self:
        # Each concrete subclass defaults its own ``type``.
        return cls(  # type: ignore[call-arg]
            occurred_at=now,
            command_id=command_id,
            subject=_account_subject(account),
            data=BillingAccountData.model_validate(_account_data(account)),
        )


class BillingAccountCreated(_BillingAccountEvent):
    """An organization's billing account was opened (``pending`` until registered online,
    ``active`` offline)."""

    TYPE = "billing_account.created"
    type: Literal["billing_account.created"] = "billing_account.created"


class BillingAccountRegistered(_BillingAccountEvent):
    """The account got its customer at the provider."""

    TYPE = "billing_account.registered"
    type: Literal["billing_account.registered"] = "billing_account.registered"


class BillingAccountCustomerDeleted(_BillingAccountEvent):
    """The account's customer was deleted at the provider (its subscriptions end with it)."""

    TYPE = "billing_account.customer_deleted"
    type: Literal["billing_account.customer_deleted"] = "billing_account.customer_deleted"


class BillingAccountRegistrationRetried(_BillingAccountEvent):
    """An operator sent a pending account's registration again now; the registration runs as
    the command of this event's ``command_id``."""

    TYPE = "billing_account.registration_retried"
    type: Literal["billing_account.registration_retried"] = "billing_account.registration_retried"


class BillingAccountMarkedOffline(_BillingAccountEvent):
    """An operator made a pending account offline: ``active`` without the provider, its
    registration abandoned (it can be registered later)."""

    TYPE = "billing_account.marked_offline"
    type: Literal["billing_account.marked_offline"] = "billing_account.marked_offline"


class BillingAccountRegistrationFailed(Event):
    """The provider refused the account for good. A ``pending`` account is removed (its
    ``state`` here is ``removed``); an offline one stays as it was."""

    TYPE = "billing_account.registration_failed"
    type: Literal["billing_account.registration_failed"] = "billing_account.registration_failed"
    data: BillingAccountRegistrationFailedData

    @classmethod
    def of(
        cls,
        account: BillingAccount,
        error: dict[str, Any],
        *,
        removed: bool,
        command_id: str | None,
        now: datetime,
    ) -> Self:
        values = _account_data(account)
        if removed:
            values["state"] = "removed"
        return cls(
            occurred_at=now,
            command_id=command_id,
            subject=_account_subject(account),
            data=BillingAccountRegistrationFailedData.model_validate(
                {**values, "error": redact(error)}
            ),
        )


# --- users -------------------------------------------------------------------------------------


class UserData(Message):
    user_id: str
    state: str


class UserEnabledEvent(Event):
    """A disabled user was enabled (enabling an enabled user emits nothing)."""

    TYPE = "user.enabled"
    type: Literal["user.enabled"] = "user.enabled"
    data: UserData

    @classmethod
    def of(cls, user: User, *, command_id: str | None, now: datetime) -> Self:
        return cls(
            occurred_at=now,
            command_id=command_id,
            subject=Subject(type="user", id=user.id),
            data=UserData(user_id=user.id, state=user.state.value),
        )


# --- plan changes ------------------------------------------------------------------------------


class PlanChangeData(Message):
    change_id: str
    subscription_id: str
    from_plan_id: str
    target_plan_id: str
    kind: ChangeKind
    state: ChangeState
    effective_at: AwareDatetime
    reason: str | None = Field(
        default=None,
        description="Why it was canceled, replaced or skipped, as a code (replaced, "
        "superseded, canceled_on_request, subscription_canceled, subscription_ended, "
        "subscription_past_due, provider_rejected, skipped_by_operator); the provider's "
        "own words and an operator's reason stay in the change's record, as they may quote "
        "what was sent.",
    )
    applied_at: AwareDatetime | None = None
    subscription_state: str | None = Field(
        default=None, description="The subscription's state once the change was decided."
    )


class _PlanChangeEvent(Event):
    data: PlanChangeData

    @classmethod
    def of(
        cls,
        change: ScheduledChange,
        *,
        command_id: str | None,
        now: datetime,
        subscription: Subscription | None = None,
    ) -> Self:
        # Each concrete subclass defaults its own ``type``.
        return cls(  # type: ignore[call-arg]
            occurred_at=now,
            command_id=command_id,
            subject=Subject(type="subscription", id=change.subscription_id),
            data=PlanChangeData(
                change_id=change.id,
                subscription_id=change.subscription_id,
                from_plan_id=change.from_plan_id,
                target_plan_id=change.target_plan_id,
                kind=change.kind,
                state=change.state,
                effective_at=change.effective_at,
                reason=None if change.reason is None else change.reason.split(":", 1)[0],
                applied_at=change.applied_at,
                subscription_state=None if subscription is None else subscription.state.value,
            ),
        )


class PlanChangeScheduled(_PlanChangeEvent):
    """A change at the period's end was scheduled (or stands again: ``reason`` ``restored``)."""

    TYPE = "subscription.plan_change.scheduled"
    type: Literal["subscription.plan_change.scheduled"] = "subscription.plan_change.scheduled"


class PlanChangeReplaced(_PlanChangeEvent):
    """A newer end-of-period request took the scheduled change's place."""

    TYPE = "subscription.plan_change.replaced"
    type: Literal["subscription.plan_change.replaced"] = "subscription.plan_change.replaced"


class PlanChangeCanceled(_PlanChangeEvent):
    """The scheduled change was canceled: on request, or superseded by an immediate change."""

    TYPE = "subscription.plan_change.canceled"
    type: Literal["subscription.plan_change.canceled"] = "subscription.plan_change.canceled"


class PlanChangeApplied(_PlanChangeEvent):
    """Beat applied a scheduled change at the period's end."""

    TYPE = "subscription.plan_change.applied"
    type: Literal["subscription.plan_change.applied"] = "subscription.plan_change.applied"


class PlanChangeSkipped(_PlanChangeEvent):
    """A change was not applied: the subscription ended, was canceled or is past due, or the
    provider refused it (``reason``)."""

    TYPE = "subscription.plan_change.skipped"
    type: Literal["subscription.plan_change.skipped"] = "subscription.plan_change.skipped"


class SubscriptionPlanChanged(_PlanChangeEvent):
    """An immediate change was made at the provider."""

    TYPE = "subscription.plan_changed"
    type: Literal["subscription.plan_changed"] = "subscription.plan_changed"


class SubscriptionSyncedData(Message):
    subscription_id: str
    changes: dict[str, list[Any]] = Field(
        description="What changed to follow the provider: field → [before, after] "
        "(state, current_period_start, current_period_end, plan_id, cancel_at, "
        "provider_item_id)."
    )
    source: Literal["webhook", "sweep", "operator"] = Field(
        description="What found it: a Stripe webhook event, the reconciliation sweep, or an "
        "operator."
    )
    provider_event_id: str | None = Field(
        default=None, description="The Stripe event that told us, if one did."
    )


class SubscriptionSynced(Event):
    """The subscription changed at the provider (a renewal, a dashboard edit, a failed or
    recovered payment, a cancelation), and our record now says what the provider holds."""

    TYPE = "subscription.synced"
    type: Literal["subscription.synced"] = "subscription.synced"
    data: SubscriptionSyncedData

    @classmethod
    def of(
        cls,
        subscription: Subscription,
        changes: dict[str, list[Any]],
        *,
        source: Literal["webhook", "sweep", "operator"],
        provider_event_id: str | None,
        command_id: str | None,
        now: datetime,
    ) -> Self:
        return cls(
            occurred_at=now,
            command_id=command_id,
            subject=Subject(type="subscription", id=subscription.id),
            data=SubscriptionSyncedData(
                subscription_id=subscription.id,
                changes=changes,
                source=source,
                provider_event_id=provider_event_id,
            ),
        )


# --- commands ----------------------------------------------------------------------------------


class CommandFailedData(Message):
    command_id: str
    command_type: str = Field(description="The command's task name.")
    error: dict[str, Any] = Field(description="The error body (personal data masked).")


class CommandRejectedData(CommandFailedData):
    """The same fields as a failure's."""


class _CommandEndedEvent(Event):
    """A command ended without doing its work (``domain.outcomes`` says which way)."""

    DATA: ClassVar[type[CommandFailedData]]

    @classmethod
    def of(
        cls, command_id: str, command_type: str, error: dict[str, Any], *, now: datetime
    ) -> Self:
        return cls(
            type=cls.TYPE,
            occurred_at=now,
            command_id=command_id,
            subject=Subject(type="command", id=command_id),
            data=cls.DATA(command_id=command_id, command_type=command_type, error=redact(error)),
        )


class CommandRetryRequestedData(Message):
    command_id: str
    command_type: str = Field(description="The command's task name.")
    status: str = Field(description="Its status when the retry was asked for.")


class CommandRetryRequested(Event):
    """An operator sent a command waiting for its retry (or its turn) again now, under its
    own id: it runs once, whichever delivery comes first."""

    TYPE = "command.retry_requested"
    type: Literal["command.retry_requested"] = "command.retry_requested"
    data: CommandRetryRequestedData

    @classmethod
    def of(cls, command_id: str, command_type: str, status: str, *, by: str, now: datetime) -> Self:
        return cls(
            occurred_at=now,
            command_id=by,
            subject=Subject(type="command", id=command_id),
            data=CommandRetryRequestedData(
                command_id=command_id, command_type=command_type, status=status
            ),
        )


class CommandFailedEvent(_CommandEndedEvent):
    """A command failed for a reason an operator acts on (its retry budget exhausted on a
    dependency that stayed down, an internal error); any command, whoever sent it. A
    caller's mistake is ``command.rejected`` instead."""

    TYPE = "command.failed"
    DATA = CommandFailedData
    type: Literal["command.failed"] = "command.failed"
    data: CommandFailedData


class CommandRejectedEvent(_CommandEndedEvent):
    """A command was rejected: the caller got it wrong (invalid, not found, a conflict, not
    permitted, refused by the provider for its data); any command, whoever sent it. The
    caller sends a corrected command; nobody replays this one."""

    TYPE = "command.rejected"
    DATA = CommandRejectedData
    type: Literal["command.rejected"] = "command.rejected"
    data: CommandRejectedData


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
        SubscriptionPlanChanged,
        SubscriptionSynced,
        CommandFailedEvent,
        CommandRetryRequested,
        CommandRejectedEvent,
    )
}
"""The catalog: every event type, by name."""


def parse_event(document: dict[str, Any]) -> Event:
    """An event read back from its JSON form (the outbox's row, a stream entry)."""
    kind = EVENT_TYPES[str(document["type"])]
    return kind.model_validate(document)
