"""Events of subscriptions: their plan changes (scheduled, replaced, canceled, applied or
skipped at the period's end, or made at once), and their syncs to what the provider holds. The
catalog (``domain.events.catalog``) knows them by name.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, Self

from pydantic import AwareDatetime, Field

from domain.events.base import Event, Subject
from domain.messages import Message
from domain.subscriptions.change_states import ChangeKind, ChangeState
from domain.subscriptions.scheduled_changes import ScheduledChange
from domain.subscriptions.subscription import Subscription


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
        "subscription_past_due, payment_failed, payment_not_completed, provider_rejected, "
        "skipped_by_operator, withdrawal_finished); the provider's "
        "own words and an operator's reason stay in the change's record, as they may quote "
        "what was sent.",
    )
    applied_at: AwareDatetime | None = None
    subscription_state: str | None = Field(
        default=None, description="The subscription's state once the change was decided."
    )
    payment_url: str | None = Field(
        default=None,
        description="Of a change awaiting payment: where the customer pays its invoice "
        "(and authenticates the payment).",
    )
    payment_expires_at: AwareDatetime | None = Field(
        default=None, description="Of a change awaiting payment: when it lapses unpaid."
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
                payment_url=change.payment_url,
                payment_expires_at=change.payment_expires_at,
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


class PlanChangeAwaitingPayment(_PlanChangeEvent):
    """An immediate change waits for the customer to pay its invoice, which needs the
    customer's authentication (``payment_url``): Stripe holds it until then, or until
    ``payment_expires_at``. Followed by ``subscription.plan_changed`` once paid, or
    ``subscription.plan_change.skipped`` (``payment_not_completed``) once lapsed."""

    TYPE = "subscription.plan_change.awaiting_payment"
    type: Literal["subscription.plan_change.awaiting_payment"] = (
        "subscription.plan_change.awaiting_payment"
    )


class SubscriptionPlanChanged(_PlanChangeEvent):
    """An immediate change was made at the provider."""

    TYPE = "subscription.plan_changed"
    type: Literal["subscription.plan_changed"] = "subscription.plan_changed"


class SubscriptionSyncedData(Message):
    subscription_id: str
    changes: dict[str, list[Any]] = Field(
        description="What changed to follow the provider: field → [before, after] "
        "(state, current_period_start, current_period_end, plan_id, cancel_at, "
        "provider_item_id, provider_schedule_id: a subscription schedule made at the provider "
        "that manages it, or null once released)."
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
