"""Subscriptions (spec section 2.3): their states, their provider's view and their phase."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import WithJsonSchema, field_serializer

from domain.billing.discounts import ProviderDiscount
from domain.errors import FailedPrecondition, InvalidArgument, error_info
from domain.messages import Message, json_value
from domain.subscriptions.billing_periods import period_end_after
from domain.subscriptions.plans import Plan

DISCOUNT_SUMMARY_LIMIT = 500
"""How much of a subscription's discounts, in words, its row keeps."""
RFC3339 = Annotated[str, WithJsonSchema({"type": "string", "format": "date-time"})]
"""A timestamp as ``datetime.isoformat`` writes it (``+00:00``), documented as such."""


class SubscriptionState(StrEnum):
    """``active`` and ``trialing`` subscriptions may change plan; ``past_due`` ones are kept
    as they are until paid; ``canceled`` and ``ended`` ones are over."""

    ACTIVE = "active"
    TRIALING = "trialing"
    PAST_DUE = "past_due"
    CANCELED = "canceled"
    ENDED = "ended"

    @property
    def accepts_plan_changes(self) -> bool:
        return self in (SubscriptionState.ACTIVE, SubscriptionState.TRIALING)

    @property
    def is_over(self) -> bool:
        return self in (SubscriptionState.CANCELED, SubscriptionState.ENDED)

    @classmethod
    def from_provider(cls, status: str) -> SubscriptionState:
        """Stripe's status in our terms: ``incomplete``, ``unpaid`` and ``paused`` are not in
        good standing (``past_due``); ``incomplete_expired`` never started (``ended``)."""
        known = {
            "active": cls.ACTIVE,
            "trialing": cls.TRIALING,
            "canceled": cls.CANCELED,
            "incomplete_expired": cls.ENDED,
            "ended": cls.ENDED,
        }
        return known.get(status, cls.PAST_DUE)


class Phase(Message):
    """The spec's ``phase`` (section 2.3): from when, on which plan."""

    effective_at: datetime
    plan_id: str

    @field_serializer("effective_at", return_type=RFC3339)
    def _rfc3339(self, value: datetime) -> str:
        return value.isoformat()


@dataclass(frozen=True)
class ProviderSubscription:
    """The provider's subscription as far as we need it. Since Stripe API 2025-03-31 the
    current period lives on the subscription's item, where the adapter reads it."""

    id: str
    status: str
    item_id: str
    price_id: str
    current_period_start: datetime
    current_period_end: datetime
    billing_cycle_anchor: datetime | None = None
    """What Stripe counts every period boundary from (see
    ``domain/subscriptions/billing_periods.py``)."""
    interval: str = "month"
    interval_count: int = 1
    cancel_at: datetime | None = None
    """When the subscription is set to end (``cancel_at_period_end`` sets it to the period's
    end); ``None`` if it renews."""
    unit_amount: int | None = None
    """What its price bills per interval, in the currency's minor units (``None``: unknown)."""
    currency: str | None = None
    pending_price_id: str | None = None
    """The price of an update the provider holds until its invoice is paid (Stripe's
    ``pending_update``, from ``payment_behavior=pending_if_incomplete``); ``None``: none."""
    pending_expires_at: datetime | None = None
    """When the provider drops that update unpaid."""
    payment_url: str | None = None
    """Where the customer pays that update's invoice (Stripe's hosted invoice page), when the
    provider's answer carried it."""
    schedule_id: str | None = None
    """The provider's subscription schedule that manages it (made in Stripe's dashboard: we
    never make one), whose phases set its price at their boundaries over any change made
    here; ``None``: none."""
    discounts: tuple[ProviderDiscount, ...] = ()
    """The discounts the provider takes off its invoices (coupons redeemed on it: never by
    us, see ``domain/billing/discounts.py``)."""

    @property
    def discount_summary(self) -> str | None:
        """Its discounts in a line (``None``: none), as a row keeps them."""
        if not self.discounts:
            return None
        return "; ".join(discount.shown() for discount in self.discounts)[:DISCOUNT_SUMMARY_LIMIT]

    @property
    def state(self) -> SubscriptionState:
        return SubscriptionState.from_provider(self.status)

    def ends_by(self, boundary: datetime) -> bool:
        """Whether the subscription is over, or set to end, at or before ``boundary``: then
        nothing is billed from it on, and a change falling due there has nothing to change."""
        return self.state.is_over or (self.cancel_at is not None and self.cancel_at <= boundary)

    def next_period_end(self, boundary: datetime) -> datetime:
        """The end of the period that starts at ``boundary`` on the current price."""
        anchor = self.billing_cycle_anchor or self.current_period_start
        return period_end_after(anchor, self.interval, self.interval_count, boundary)


@dataclass(frozen=True)
class SubscriptionTerms:
    """How a new subscription is billed at the provider (``subscriptions create``).

    ``send_invoice`` makes the subscription active at once without a payment method (Stripe
    emails an invoice due in ``days_until_due`` days); ``charge_automatically`` needs the
    customer's default payment method, without which real Stripe leaves it ``incomplete``.
    """

    collection_method: Literal["send_invoice", "charge_automatically"] = "send_invoice"
    days_until_due: int = 30
    trial_days: int = 0


@dataclass
class Subscription:
    id: str
    billing_account_id: str
    plan_id: str
    state: SubscriptionState
    provider: str
    provider_id: str
    current_period_start: datetime
    current_period_end: datetime
    created_at: datetime
    updated_at: datetime
    provider_item_id: str | None = None
    """The provider's id of the subscription's one item, whose price a plan change replaces
    (unknown for subscriptions recorded before it was kept: read from the provider then)."""
    cancel_at: datetime | None = None
    """When the subscription is set to end at the provider, if it is."""
    synced_at: datetime | None = None
    """When the provider's subscription was last read in full (the sweep's order)."""
    billed_price_id: str | None = None
    """The price the provider bills, as last read (a price that is none of our plans, or
    another plan's, shows here while ``plan_id`` keeps ours: the off-plan gauge counts it)."""
    provider_schedule_id: str | None = None
    """The provider's schedule that manages the subscription, as last read: while it does, no
    plan change is accepted here (its phases would undo it), and a pending one is skipped."""
    billed_discount: str | None = None
    """The discounts the provider takes off that price, in words, as last read (``None``:
    none; the discounted gauge counts the live subscriptions that have one)."""

    @classmethod
    def started(
        cls,
        subscription_id: str,
        billing_account_id: str,
        plan: Plan,
        provider: str,
        remote: ProviderSubscription,
        now: datetime,
    ) -> Subscription:
        return cls(
            id=subscription_id,
            billing_account_id=billing_account_id,
            plan_id=plan.id,
            state=remote.state,
            provider=provider,
            provider_id=remote.id,
            current_period_start=remote.current_period_start,
            current_period_end=remote.current_period_end,
            created_at=now,
            updated_at=now,
            provider_item_id=remote.item_id,
            billed_price_id=remote.price_id,
            billed_discount=remote.discount_summary,
            provider_schedule_id=remote.schedule_id,
        )

    @staticmethod
    def creation_key(subscription_id: str) -> str:
        return f"{subscription_id}:create-subscription"

    def ensure_accepts_plan_changes(self) -> None:
        if not self.state.accepts_plan_changes:
            raise FailedPrecondition(
                f"subscription {self.id!r} is {self.state.value}: only an active or trialing "
                "subscription can change plan",
                details=[
                    error_info(
                        "SUBSCRIPTION_NOT_CHANGEABLE",
                        subscription_id=self.id,
                        state=self.state.value,
                    )
                ],
            )
        if self.provider_schedule_id is not None:
            raise FailedPrecondition(
                f"subscription {self.id!r} is managed by the billing provider's subscription "
                f"schedule {self.provider_schedule_id!r}, whose phases would undo a plan "
                "change made here: release the schedule at the provider first",
                details=[
                    error_info(
                        "SUBSCRIPTION_SCHEDULED_AT_PROVIDER",
                        subscription_id=self.id,
                        schedule_id=self.provider_schedule_id,
                    )
                ],
            )

    def ensure_not_on(self, plan: Plan) -> None:
        if plan.id == self.plan_id:
            raise InvalidArgument.for_fields(
                f"subscription {self.id!r} is already on plan {plan.name!r}",
                [
                    (
                        "plan",
                        "is the current plan; to drop an upcoming change send "
                        "phase_change.cancel_upcoming_changes",
                    )
                ],
            )

    def synced(self, remote: ProviderSubscription, now: datetime) -> bool:
        """Take the provider's state, period, item and ``cancel_at`` (not its plan); returns
        whether anything changed."""
        return bool(self.follow(remote, None, expected_price=None, now=now))

    def ensure_proration_date(self, when: datetime, now: datetime) -> None:
        """A change may be prorated as of a time within the current period, not ahead."""
        if not self.current_period_start <= when <= now:
            raise InvalidArgument.for_fields(
                f"cannot prorate the change of subscription {self.id!r} as of {when.isoformat()}",
                [
                    (
                        "proration_date",
                        "must lie within the current period (from "
                        f"{self.current_period_start.isoformat()}) and not in the future",
                    )
                ],
            )

    def entered_period(
        self, plan_id: str, period_start: datetime, period_end: datetime, now: datetime
    ) -> None:
        """A staged change took effect: the new period, on the new plan."""
        self.plan_id = plan_id
        self.current_period_start, self.current_period_end = period_start, period_end
        self.updated_at = now

    def switched(self, plan_id: str, remote: ProviderSubscription, now: datetime) -> None:
        self.plan_id = plan_id
        self.synced(remote, now)
        self.updated_at = now

    def follow(
        self,
        remote: ProviderSubscription,
        plan_of_price: str | None,
        *,
        expected_price: str | None,
        now: datetime,
    ) -> dict[str, list[Any]]:
        """Take what the provider holds: state, period, item, ``cancel_at``, and the plan of
        its price (``plan_of_price``, ``None`` for a price that is none of our plans), unless
        that price is ``expected_price`` (a change staged ahead of its boundary, whose plan
        takes effect here only then). Returns what changed, ``field`` → ``[before, after]``."""
        wanted: dict[str, Any] = {
            "state": remote.state,
            "current_period_start": remote.current_period_start,
            "current_period_end": remote.current_period_end,
            "provider_item_id": remote.item_id,
            "cancel_at": remote.cancel_at,
            "provider_schedule_id": remote.schedule_id,
        }
        if plan_of_price is not None and remote.price_id != expected_price:
            wanted["plan_id"] = plan_of_price
        changes: dict[str, list[Any]] = {}
        for name, value in wanted.items():
            before = getattr(self, name)
            if before != value:
                changes[name] = [json_value(before), json_value(value)]
                setattr(self, name, value)
        # Kept, not changes: the plan is what changes.
        self.billed_price_id = remote.price_id
        self.billed_discount = remote.discount_summary
        self.synced_at = now
        if changes:
            self.updated_at = now
        return changes

    def current_phase(self) -> Phase:
        return Phase(effective_at=self.current_period_start, plan_id=self.plan_id)

    def to_view(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "billing_account_id": self.billing_account_id,
            "plan_id": self.plan_id,
            "state": self.state.value,
            "provider": self.provider,
            "provider_id": self.provider_id,
            "current_period_start": self.current_period_start.isoformat(),
            "current_period_end": self.current_period_end.isoformat(),
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
            "billed_discount": self.billed_discount,
            "provider_schedule_id": self.provider_schedule_id,
        }
