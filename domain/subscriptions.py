"""Plans, subscriptions and plan changes (spec sections 2.3, 4.3 and 9).

A plan change is a :class:`ScheduledChange` row whatever its timing, so that every change of a
subscription goes through the same states and the same provider call:

* ``immediate``: made ``applying`` when accepted and applied at once by the request's task;
* ``end_of_period``: ``scheduled`` at the current period's end; beat's sweep claims it once
  due (``applying``, with a lease) and a worker applies it.

``applying`` is left for ``applied``, or ``skipped`` (the subscription ended meanwhile, or the
provider refused the change for good); a ``scheduled`` change may be ``canceled`` (replaced by
a newer request, superseded by an immediate change, or canceled on request). At most one
change per subscription is ``scheduled`` or ``applying`` (a database uniqueness rule).

The provider is called with the idempotency key ``{change_id}:apply`` for every attempt of one
change, so a change reaches the provider once however often it is retried or re-claimed.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Annotated, Any, ClassVar, Literal, Self

import pycountry
from pydantic import (
    Field,
    StrictBool,
    StringConstraints,
    field_serializer,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from domain.errors import FailedPrecondition, InvalidArgument, error_info
from domain.messages import Command, Message, ResourceId, Result
from domain.rate_budget import Priority

ProrationBehavior = Literal["create_prorations", "always_invoice", "none"]
AT_PERIOD_BOUNDARY: ProrationBehavior = "none"
"""A change at the period's end bills nothing for the period that ended."""

PlanName = Annotated[
    str,
    StringConstraints(
        strip_whitespace=True,
        to_lower=True,
        min_length=1,
        max_length=64,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]*$",
    ),
]
"""A plan's unique name, such as ``starter`` or ``team-annual``."""


class PlanInterval(StrEnum):
    MONTH = "month"
    YEAR = "year"


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


class ChangeState(StrEnum):
    SCHEDULED = "scheduled"
    APPLYING = "applying"
    APPLIED = "applied"
    CANCELED = "canceled"
    SKIPPED = "skipped"

    @property
    def is_pending(self) -> bool:
        return self in (ChangeState.SCHEDULED, ChangeState.APPLYING)


class ChangeKind(StrEnum):
    IMMEDIATE = "immediate"
    END_OF_PERIOD = "end_of_period"


class ChangeReason(StrEnum):
    """Why a change was canceled or skipped (``reason`` of the change)."""

    REPLACED = "replaced"
    """A newer end-of-period request took its place."""
    SUPERSEDED = "superseded"
    """An immediate change was made before it fell due."""
    CANCELED_ON_REQUEST = "canceled_on_request"
    """``phase_change.cancel_upcoming_changes``."""
    SUBSCRIPTION_CANCELED = "subscription_canceled"
    SUBSCRIPTION_ENDED = "subscription_ended"
    SUBSCRIPTION_PAST_DUE = "subscription_past_due"
    """An immediate change found the subscription not in good standing at the provider."""
    PROVIDER_REJECTED = "provider_rejected"
    """The provider refused the change for good (the message follows the reason)."""

    @classmethod
    def subscription_in(cls, state: SubscriptionState) -> ChangeReason:
        """Why a change of a subscription in ``state`` (canceled, ended, past due) is skipped."""
        if state is SubscriptionState.ENDED:
            return cls.SUBSCRIPTION_ENDED
        if state is SubscriptionState.PAST_DUE:
            return cls.SUBSCRIPTION_PAST_DUE
        return cls.SUBSCRIPTION_CANCELED


# --- plans ------------------------------------------------------------------------------------


class PlanSpec(Message):
    """What an operator gives to create a plan (``billing-worker plans create``)."""

    name: PlanName
    title: Annotated[str, StringConstraints(strip_whitespace=True, max_length=255)] = ""
    amount: int = Field(ge=0, le=99_999_999, description="Minor units per interval (cents).")
    currency: str
    interval: PlanInterval = PlanInterval.MONTH

    @model_validator(mode="before")
    @classmethod
    def _default_title(cls, data: Any) -> Any:
        if isinstance(data, dict) and not str(data.get("title") or "").strip():
            name = str(data.get("name") or "").strip()
            return {**data, "title": name.replace("-", " ").replace("_", " ").title()}
        return data

    @field_validator("currency")
    @classmethod
    def _iso_currency(cls, value: str) -> str:
        code = value.strip().upper()
        if len(code) != 3 or pycountry.currencies.get(alpha_3=code) is None:
            raise PydanticCustomError(
                "currency", "must be an ISO 4217 currency code, such as usd or EUR"
            )
        return code.lower()


@dataclass(frozen=True)
class ProviderPlan:
    """What the provider is told about a plan: one product with one recurring price."""

    plan_id: str
    name: str
    title: str
    amount: int
    currency: str
    interval: str


@dataclass(frozen=True)
class ProviderPrice:
    product_id: str
    price_id: str


@dataclass
class Plan:
    id: str
    name: str
    title: str
    interval: PlanInterval
    amount: int
    currency: str
    active: bool
    created_at: datetime
    updated_at: datetime
    provider: str | None = None
    provider_product_id: str | None = None
    provider_price_id: str | None = None

    @classmethod
    def new(cls, plan_id: str, spec: PlanSpec, now: datetime) -> Plan:
        return cls(
            id=plan_id,
            name=spec.name,
            title=spec.title,
            interval=spec.interval,
            amount=spec.amount,
            currency=spec.currency,
            active=True,
            created_at=now,
            updated_at=now,
        )

    @property
    def is_registered(self) -> bool:
        return self.provider_price_id is not None

    @property
    def registration_key(self) -> str:
        """One product and price per plan, however often the creation is retried."""
        return f"{self.id}:create-price"

    def matches(self, spec: PlanSpec) -> bool:
        return (self.name, self.title, self.interval, self.amount, self.currency) == (
            spec.name,
            spec.title,
            spec.interval,
            spec.amount,
            spec.currency,
        )

    def provider_plan(self) -> ProviderPlan:
        return ProviderPlan(
            plan_id=self.id,
            name=self.name,
            title=self.title,
            amount=self.amount,
            currency=self.currency,
            interval=self.interval.value,
        )

    def registered(self, provider: str, price: ProviderPrice, now: datetime) -> None:
        self.provider = provider
        self.provider_product_id = price.product_id
        self.provider_price_id = price.price_id
        self.updated_at = now

    def ensure_available(self, field: str = "plan") -> None:
        """A subscription can be moved to this plan (a 400 otherwise)."""
        if not self.active or not self.is_registered:
            raise FailedPrecondition(
                f"plan {self.name!r} is not available",
                details=[error_info("PLAN_NOT_AVAILABLE", plan_id=self.id, field=field)],
            )

    def to_view(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "title": self.title,
            "interval": self.interval.value,
            "amount": self.amount,
            "currency": self.currency,
            "active": self.active,
            "provider": self.provider or "",
            "provider_product_id": self.provider_product_id or "",
            "provider_price_id": self.provider_price_id or "",
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
        }


# --- subscriptions ----------------------------------------------------------------------------


class Phase(Message):
    """The spec's ``phase`` (section 2.3): from when, on which plan."""

    effective_at: datetime
    plan_id: str

    @field_serializer("effective_at")
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

    @property
    def state(self) -> SubscriptionState:
        return SubscriptionState.from_provider(self.status)


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
        """Take the provider's state and period; returns whether anything changed."""
        values = (
            remote.state,
            remote.current_period_start,
            remote.current_period_end,
            remote.item_id,
        )
        if values == (
            self.state,
            self.current_period_start,
            self.current_period_end,
            self.provider_item_id,
        ):
            return False
        (
            self.state,
            self.current_period_start,
            self.current_period_end,
            self.provider_item_id,
        ) = values
        self.updated_at = now
        return True

    def switched(self, plan_id: str, remote: ProviderSubscription, now: datetime) -> None:
        self.plan_id = plan_id
        self.synced(remote, now)
        self.updated_at = now

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
        }


# --- plan changes -----------------------------------------------------------------------------


def change_id_for(command_id: str) -> str:
    """The change a command makes: a redelivered command finds its own change again."""
    return "chg_" + uuid.uuid5(uuid.NAMESPACE_URL, f"billing-worker:change:{command_id}").hex


@dataclass
class ScheduledChange:
    id: str
    subscription_id: str
    from_plan_id: str
    target_plan_id: str
    kind: ChangeKind
    effective_at: datetime
    state: ChangeState
    proration_behavior: ProrationBehavior
    created_at: datetime
    updated_at: datetime
    command_id: str | None = None
    reason: str | None = None
    claims: int = 0
    lease_until: datetime | None = None
    applied_at: datetime | None = None
    apply_lag_seconds: float | None = None
    first_sent_at: datetime | None = None
    """When the change was first about to be sent to the provider (recorded before the call)."""

    @classmethod
    def immediate(
        cls,
        change_id: str,
        subscription: Subscription,
        plan: Plan,
        *,
        proration_behavior: ProrationBehavior,
        lease: timedelta,
        now: datetime,
        command_id: str | None = None,
    ) -> ScheduledChange:
        """A change to apply now: claimed at once by the request that makes it."""
        return cls(
            id=change_id,
            subscription_id=subscription.id,
            from_plan_id=subscription.plan_id,
            target_plan_id=plan.id,
            kind=ChangeKind.IMMEDIATE,
            effective_at=now,
            state=ChangeState.APPLYING,
            proration_behavior=proration_behavior,
            created_at=now,
            updated_at=now,
            command_id=command_id,
            claims=1,
            lease_until=now + lease,
        )

    @classmethod
    def at_period_end(
        cls,
        change_id: str,
        subscription: Subscription,
        plan: Plan,
        *,
        now: datetime,
        command_id: str | None = None,
    ) -> ScheduledChange:
        """A change at the end of the subscription's current period, without proration."""
        return cls(
            id=change_id,
            subscription_id=subscription.id,
            from_plan_id=subscription.plan_id,
            target_plan_id=plan.id,
            kind=ChangeKind.END_OF_PERIOD,
            effective_at=subscription.current_period_end,
            state=ChangeState.SCHEDULED,
            proration_behavior=AT_PERIOD_BOUNDARY,
            created_at=now,
            updated_at=now,
            command_id=command_id,
        )

    @property
    def provider_idempotency_key(self) -> str:
        """The same for every attempt and every claim of this change."""
        return f"{self.id}:apply"

    @property
    def phase(self) -> Phase:
        return Phase(effective_at=self.effective_at, plan_id=self.target_plan_id)

    def applies_to(self, state: SubscriptionState) -> bool:
        """Whether a subscription in ``state`` still takes this change: an immediate change
        only while the subscription may change plan; a change that fell due also while it is
        past due (it was asked for in good standing), never once it is over."""
        if self.kind is ChangeKind.IMMEDIATE:
            return state.accepts_plan_changes
        return not state.is_over

    def about_to_send(self, now: datetime) -> None:
        """Record, before the provider call, that the change is being sent (the first time)."""
        if self.first_sent_at is None:
            self.first_sent_at = now
            self.updated_at = now

    def outcome_may_be_forgotten(self, now: datetime, key_window: timedelta) -> bool:
        """Whether an earlier attempt to send this change may have reached the provider and
        be older than its memory of the idempotency key: then sending again could change
        twice, and the provider must be read first. A change never sent before, or first
        sent within ``key_window``, is sent blind (a repetition is a replay)."""
        return self.first_sent_at is not None and now - self.first_sent_at >= key_window

    def is_due(self, now: datetime) -> bool:
        return self.effective_at <= now

    def claim(self, now: datetime, lease: timedelta) -> None:
        """Take the change to apply it, until ``now + lease`` (then another may take it)."""
        self.state = ChangeState.APPLYING
        self.claims += 1
        self.lease_until = now + lease
        self.updated_at = now

    def ensure_due(self, now: datetime) -> None:
        if not self.is_due(now):
            raise FailedPrecondition(
                f"change {self.id!r} is not due before {self.effective_at.isoformat()}",
                details=[
                    error_info(
                        "CHANGE_NOT_DUE",
                        change_id=self.id,
                        effective_at=self.effective_at.isoformat(),
                    )
                ],
            )

    def cancel(self, reason: ChangeReason, now: datetime) -> None:
        self._finish(ChangeState.CANCELED, reason.value, now)

    def skip(self, reason: ChangeReason, now: datetime, detail: str = "") -> None:
        self._finish(
            ChangeState.SKIPPED, f"{reason.value}: {detail}" if detail else reason.value, now
        )

    def restore(self, now: datetime) -> None:
        """Undo a supersession whose immediate change the provider refused."""
        self.state = ChangeState.SCHEDULED
        self.reason = None
        self.lease_until = None
        self.updated_at = now

    def applied(self, now: datetime) -> None:
        self.state = ChangeState.APPLIED
        self.applied_at = now
        self.apply_lag_seconds = round((now - self.effective_at).total_seconds(), 3)
        self.lease_until = None
        self.updated_at = now

    def _finish(self, state: ChangeState, reason: str, now: datetime) -> None:
        self.state = state
        self.reason = reason[:255]
        self.lease_until = None
        self.updated_at = now

    def to_view(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "subscription_id": self.subscription_id,
            "from_plan_id": self.from_plan_id,
            "plan_id": self.target_plan_id,
            "kind": self.kind.value,
            "effective_at": self.effective_at.isoformat(),
            "state": self.state.value,
            "reason": self.reason or "",
            "proration_behavior": self.proration_behavior,
            "claims": self.claims,
            "applied_at": self.applied_at.isoformat() if self.applied_at else None,
            "apply_lag_seconds": self.apply_lag_seconds,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
        }


# --- messages ---------------------------------------------------------------------------------

PlanRef = Annotated[
    str,
    StringConstraints(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:\-]*$"),
]
"""A plan's id (``plan_…``) or its name."""


class ChangeSubscriptionPlan(Command):
    """Change a subscription's plan now or at the end of its period, or cancel the upcoming
    change (``POST …/subscriptions/{id}/change``). Exactly one of ``plan`` and
    ``cancel_upcoming_changes`` is given; ``immediate`` goes with ``plan``."""

    TASK_NAME: ClassVar[str] = "subscriptions.change_plan"
    QUEUE: ClassVar[str] = "subscriptions"

    org_id: ResourceId
    billing_account_id: ResourceId
    subscription_id: ResourceId
    plan: PlanRef | None = None
    immediate: StrictBool = False
    cancel_upcoming_changes: StrictBool = False

    @model_validator(mode="after")
    def _one_thing_to_do(self) -> Self:
        if self.plan is not None and self.cancel_upcoming_changes:
            raise PydanticCustomError(
                "conflict", "a plan change and cancel_upcoming_changes cannot go together"
            )
        if self.plan is None and not self.cancel_upcoming_changes:
            raise PydanticCustomError(
                "nothing_requested", "give a plan to change to, or cancel_upcoming_changes: true"
            )
        if self.immediate and self.plan is None:
            raise PydanticCustomError("immediate_without_plan", "immediate needs a plan")
        return self


class ApplyScheduledChange(Command):
    """Apply a due plan change at the provider, then locally. Published by beat's sweep
    (``command_id`` ``apply:{change_id}:{claim}``); applying an applied change does nothing."""

    TASK_NAME: ClassVar[str] = "subscriptions.apply_scheduled_change"
    QUEUE: ClassVar[str] = "subscriptions"
    PRIORITY: ClassVar[Priority] = Priority.BULK

    change_id: ResourceId


class PlanChanged(Result):
    """The phase the request leads to (the HTTP response is ``{"phase": …}``).

    ``change`` is the change made (``None`` when upcoming changes were canceled);
    ``canceled_changes`` the ids of the pending changes it canceled or replaced.
    """

    phase: Phase
    subscription_id: str
    change: dict[str, Any] | None = None
    canceled_changes: list[str] = Field(default_factory=list)


class ScheduledChangeOutcome(Result):
    """Where a change ended: ``applied`` (with its lag), ``skipped`` (with the reason)…"""

    change: dict[str, Any]


# --- the HTTP request -------------------------------------------------------------------------

REQUEST_FIELDS = frozenset({"plan", "immediate", "plan_change", "phase_change"})
PLAN_CHANGE_FIELDS = frozenset({"plan", "immediate"})
PHASE_CHANGE_FIELDS = frozenset({"cancel_upcoming_changes"})
_PLAN_REF = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}$")


@dataclass(frozen=True)
class ChangeRequest:
    """A change request body resolved into the command's fields.

    ``plan_field`` names where the plan came from (``plan_change.plan`` or the deprecated
    ``plan``), so that errors about it name the field the caller sent.
    """

    plan: str | None
    immediate: bool
    cancel_upcoming_changes: bool
    used_deprecated_fields: bool
    plan_field: str = "plan_change.plan"

    def command_fields(self) -> dict[str, Any]:
        return {
            "plan": self.plan,
            "immediate": self.immediate,
            "cancel_upcoming_changes": self.cancel_upcoming_changes,
        }


def resolve_change_request(body: Mapping[str, Any]) -> ChangeRequest:
    """Resolve a change request body (spec 4.3), or raise a 400 listing every problem.

    * ``plan_change`` decides when present. The deprecated top-level ``plan`` and
      ``immediate`` may come along only if they agree with it (``plan_change.immediate``
      defaults to ``false``).
    * Without ``plan_change`` the deprecated fields are honoured; ``immediate`` alone is not a
      request.
    * ``phase_change.cancel_upcoming_changes: true`` cancels the pending change; it cannot be
      combined with a plan change.
    * Something must be requested. Unknown fields, wrong types and ``null`` objects' unknown
      members are errors; a ``null`` value counts as absent.
    """
    violations: list[tuple[str, str]] = []
    for name in sorted(set(body) - REQUEST_FIELDS):
        violations.append((name, "unknown field"))
    plan_change = _object(body, "plan_change", PLAN_CHANGE_FIELDS, violations)
    phase_change = _object(body, "phase_change", PHASE_CHANGE_FIELDS, violations)
    legacy_plan = _plan(body.get("plan"), "plan", violations)
    legacy_immediate = _bool(body.get("immediate"), "immediate", violations)
    new_plan = _plan(plan_change.get("plan"), "plan_change.plan", violations)
    new_immediate = _bool(plan_change.get("immediate"), "plan_change.immediate", violations)
    cancel = _bool(
        phase_change.get("cancel_upcoming_changes"),
        "phase_change.cancel_upcoming_changes",
        violations,
    )
    if violations:
        raise InvalidArgument.for_fields("the request is invalid", violations)

    used_deprecated = legacy_plan is not None or legacy_immediate is not None
    plan_field = "plan_change.plan"
    if "plan_change" in body and body["plan_change"] is not None:
        plan, immediate = new_plan, bool(new_immediate)
        if plan is None:
            violations.append(("plan_change.plan", "required: the plan to change to"))
        if legacy_plan is not None and plan is not None and legacy_plan != plan:
            violations.append(
                ("plan", f"contradicts plan_change.plan ({plan!r}); send plan_change only")
            )
        if legacy_immediate is not None and legacy_immediate != immediate:
            violations.append(
                (
                    "immediate",
                    f"contradicts plan_change.immediate ({str(immediate).lower()}); send "
                    "plan_change only",
                )
            )
    else:
        plan, immediate = legacy_plan, bool(legacy_immediate)
        plan_field = "plan"
        if legacy_immediate is not None and plan is None:
            violations.append(("immediate", "needs a plan: send plan_change.plan"))
    if cancel and plan is not None:
        violations.append(
            (
                "phase_change.cancel_upcoming_changes",
                "cannot be combined with a plan change: send them as two requests",
            )
        )
    if not violations and plan is None and not cancel:
        violations.append(
            (
                "plan_change",
                "nothing requested: send plan_change.plan, or "
                "phase_change.cancel_upcoming_changes: true",
            )
        )
    if violations:
        raise InvalidArgument.for_fields("the request is invalid", violations)
    return ChangeRequest(
        plan=plan,
        immediate=immediate,
        cancel_upcoming_changes=bool(cancel),
        used_deprecated_fields=used_deprecated,
        plan_field=plan_field,
    )


def _object(
    body: Mapping[str, Any],
    name: str,
    allowed: frozenset[str],
    violations: list[tuple[str, str]],
) -> Mapping[str, Any]:
    value = body.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        violations.append((name, "must be an object"))
        return {}
    for key in sorted(set(value) - allowed):
        violations.append((f"{name}.{key}", "unknown field"))
    return value


def _plan(value: Any, field: str, violations: list[tuple[str, str]]) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _PLAN_REF.fullmatch(value):
        violations.append(
            (field, "must be a plan id or name: 1 to 128 characters of [A-Za-z0-9_.:-]")
        )
        return None
    return value


def _bool(value: Any, field: str, violations: list[tuple[str, str]]) -> bool | None:
    if value is None:
        return None
    if not isinstance(value, bool):
        violations.append((field, "must be a boolean"))
        return None
    return value
