"""Plan changes of subscriptions (spec sections 4.3 and 9): the change and its life.

A plan change is a :class:`ScheduledChange` row whatever its timing, so that every change of a
subscription goes through the same states and the same provider call:

* ``immediate``: made ``applying`` when accepted and applied at once by the request's task;
* ``end_of_period``: ``scheduled`` at the current period's end; beat's sweep claims it once
  due (``applying``, with a lease) and a worker applies it.

``applying`` is left for ``applied``, or ``skipped`` (the subscription ended meanwhile, or the
provider refused the change for good); a ``scheduled`` change may be ``canceled`` (replaced by
a newer request, superseded by an immediate change, or canceled on request), and so may a
``staged`` one once it is taken back at the provider, until a guard before its boundary. At most one
change per subscription is ``scheduled`` or ``applying`` (a database uniqueness rule).

The provider is called with the idempotency key ``{change_id}:apply`` for every attempt of one
change, so a change reaches the provider once however often it is retried or re-claimed.

The states, kinds and reasons are in :mod:`domain.subscriptions.change_states`; the commands
that make and apply a change in :mod:`domain.subscriptions.change_commands`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from domain.errors import FailedPrecondition, error_info
from domain.subscriptions.change_states import ChangeKind, ChangeReason, ChangeState
from domain.subscriptions.plans import Plan
from domain.subscriptions.proration import AT_PERIOD_BOUNDARY, ProrationBehavior
from domain.subscriptions.subscription import Phase, Subscription, SubscriptionState


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
    staged_period_end: datetime | None = None
    """For a ``staged`` change: the end of the period that starts at ``effective_at``."""
    payment_url: str | None = None
    """For a change ``awaiting_payment``: where the customer pays (and authenticates)."""
    payment_expires_at: datetime | None = None
    """For a change ``awaiting_payment``: when the provider drops it unpaid."""

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
        proration_date: datetime | None = None,
    ) -> ScheduledChange:
        """A change to apply now: claimed at once by the request that makes it. It takes
        effect (and is prorated) at ``proration_date`` when given (the time a preview was
        made for), else now."""
        return cls(
            id=change_id,
            subscription_id=subscription.id,
            from_plan_id=subscription.plan_id,
            target_plan_id=plan.id,
            kind=ChangeKind.IMMEDIATE,
            effective_at=proration_date or now,
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
    def late_correction_key(self) -> str:
        """The key of the correction sent when the provider renewed before the change was
        made: another request than the on-time one, so under a key of its own."""
        return f"{self.id}:apply-late"

    @property
    def late_realign_key(self) -> str:
        """The key of the write that puts the price the provider's renewal billed back on the
        item, when the on-time change reached the provider only after it renewed: the late
        correction (:attr:`late_correction_key`) then prorates from that price."""
        return f"{self.id}:realign-late"

    @property
    def withdrawal_key(self) -> str:
        """The key of the write that takes a staged change back at the provider (its item
        back on the price it had, without proration)."""
        return f"{self.id}:withdraw"

    @property
    def withdrawal_realign_key(self) -> str:
        """Like :attr:`late_realign_key`, for a withdrawal the provider made after it
        renewed (at the staged price)."""
        return f"{self.id}:withdraw-realign"

    @property
    def withdrawal_correction_key(self) -> str:
        """Like :attr:`late_correction_key`, for a withdrawal the provider made after it
        renewed: the new period is prorated back to the price the change had replaced."""
        return f"{self.id}:withdraw-late"

    @property
    def is_withdrawing(self) -> bool:
        """A staged change being taken back at the provider: it does not take effect here
        at its boundary while the withdrawal's lease runs."""
        return self.state is ChangeState.STAGED and self.lease_until is not None

    @property
    def pending_update_key(self) -> str:
        """The key of an immediate change sent again as a pending update, after the provider
        answered that the customer must authenticate its payment."""
        return f"{self.id}:pending"

    def await_payment(self, url: str | None, expires_at: datetime | None, now: datetime) -> None:
        """The provider holds the change until the customer pays its invoice at ``url``."""
        self.state = ChangeState.AWAITING_PAYMENT
        self.payment_url = url
        self.payment_expires_at = expires_at
        self.lease_until = None
        self.updated_at = now

    def ensure_not_awaiting_payment(self) -> None:
        """A change held for the customer's payment is not replaced, superseded or canceled
        here: the provider holds it, and only the customer's payment or its expiry end it."""
        if self.state is ChangeState.AWAITING_PAYMENT:
            expires = self.payment_expires_at.isoformat() if self.payment_expires_at else ""
            raise FailedPrecondition(
                f"the change {self.id!r} to plan {self.target_plan_id!r} waits for the "
                f"customer to pay its invoice{f' until {expires}' if expires else ''}; request "
                "another change once it is paid or has lapsed",
                details=[
                    error_info(
                        "CHANGE_AWAITING_PAYMENT",
                        change_id=self.id,
                        payment_url=self.payment_url or "",
                        expires_at=expires,
                    )
                ],
            )

    def withdrawal_given_up(self, now: datetime) -> bool:
        """A withdrawal whose lease ran out: the request that began it gave up (its retries
        spent, or its worker gone for good) after its write may have reached the provider.
        It is finished (``FinishStagedWithdrawal``), never left to take effect here."""
        return self.is_withdrawing and self.lease_until is not None and self.lease_until < now

    @property
    def finish_withdrawal_command_id(self) -> str:
        """The command that finishes a withdrawal given up: one per lease that ran out, so
        that a sweep's repeated publishes are one command, and a finish that gave up too
        gets another."""
        assert self.lease_until is not None
        return f"withdraw:{self.id}:{int(self.lease_until.timestamp())}"

    def claimable_from(self, lead: timedelta) -> datetime:
        """When beat may take the change: a change at the period's end is made at the
        provider ``lead`` before its boundary, so that the renewal bills the new price."""
        if self.kind is ChangeKind.END_OF_PERIOD:
            return self.effective_at - lead
        return self.effective_at

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

    def ends_skipped_for(self, state: SubscriptionState) -> bool:
        """Whether the change ends here, skipped, for a subscription we store in ``state``:
        when it no longer applies (:meth:`applies_to`) and was never sent. A change sent
        before is sent again under its key whatever our row says: its first write may have
        reached the provider (its answer lost, or still coming), and only the provider's
        answer, replayed under the key, tells. Skipped on our row, it was recorded skipped
        while the provider made it and billed it (found by the fault schedules, seed 2014)."""
        return self.first_sent_at is None and not self.applies_to(state)

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

    def is_due(self, now: datetime, lead: timedelta = timedelta(0)) -> bool:
        return self.claimable_from(lead) <= now

    def claim(self, now: datetime, lease: timedelta) -> None:
        """Take the change to apply it, until ``now + lease`` (then another may take it)."""
        self.state = ChangeState.APPLYING
        self.claims += 1
        self.lease_until = now + lease
        self.updated_at = now

    def ensure_due(self, now: datetime, lead: timedelta = timedelta(0)) -> None:
        if not self.is_due(now, lead):
            due = self.claimable_from(lead).isoformat()
            raise FailedPrecondition(
                f"change {self.id!r} is not due before {due}",
                details=[
                    error_info(
                        "CHANGE_NOT_DUE",
                        change_id=self.id,
                        effective_at=self.effective_at.isoformat(),
                        due_at=due,
                    )
                ],
            )

    def stage(self, period_end: datetime, now: datetime) -> None:
        """The provider holds the new price ahead of the boundary; here the change takes
        effect at ``effective_at``, with the period that ends at ``period_end``."""
        self.state = ChangeState.STAGED
        self.staged_period_end = period_end
        self.lease_until = None
        self.updated_at = now

    def reschedule(self, effective_at: datetime, now: datetime) -> None:
        """The provider's period now ends elsewhere (a trial extended, the cycle reset): the
        change moves with it."""
        self.state = ChangeState.SCHEDULED
        self.effective_at = effective_at
        self.lease_until = None
        self.updated_at = now

    def ensure_not_staged(self) -> None:
        """A staged change is made at the provider already: it is not canceled as a scheduled
        one is (a request withdraws it first, :meth:`begin_withdrawal`; an operator's skip is
        refused)."""
        if self.state is ChangeState.STAGED:
            raise FailedPrecondition(
                f"the change {self.id!r} to plan {self.target_plan_id!r} is already made at "
                f"the billing provider for the period starting {self.effective_at.isoformat()}; "
                "request another change once that period has started",
                details=[
                    error_info(
                        "CHANGE_ALREADY_STAGED",
                        change_id=self.id,
                        effective_at=self.effective_at.isoformat(),
                    )
                ],
            )

    def begin_withdrawal(self, now: datetime, guard: timedelta, lease: timedelta) -> None:
        """Take a staged change back (a cancel, a replacement or an immediate change asked
        after it was staged): allowed until ``guard`` before its boundary, so that the
        provider holds the old price again before it renews; a withdrawal under way (a
        retry) goes on whatever the time. Held for ``lease``: meanwhile the change does not
        take effect here."""
        if not self.is_withdrawing and now >= self.effective_at - guard:
            raise FailedPrecondition(
                f"the change {self.id!r} to plan {self.target_plan_id!r} takes effect at the "
                f"billing provider at {self.effective_at.isoformat()}, in less than "
                f"{guard.total_seconds():g} s: it can no longer be withdrawn before that "
                "renewal; request another change once that period has started",
                details=[
                    error_info(
                        "CHANGE_ALREADY_STAGED",
                        change_id=self.id,
                        effective_at=self.effective_at.isoformat(),
                        withdrawable_until=(self.effective_at - guard).isoformat(),
                    )
                ],
            )
        self.lease_until = now + lease
        self.updated_at = now

    def withdrawal_refused(self, now: datetime) -> None:
        """The provider refused to take the change back: it stays staged, and takes effect."""
        self.lease_until = None
        self.updated_at = now

    def cancel(self, reason: ChangeReason, now: datetime) -> None:
        self._finish(ChangeState.CANCELED, reason.value, now)

    def skip(self, reason: ChangeReason, now: datetime, detail: str = "") -> None:
        self._finish(
            ChangeState.SKIPPED, f"{reason.value}: {detail}" if detail else reason.value, now
        )

    @property
    def corrects_late(self) -> bool:
        """Whether the provider renewed before this change reached it, so that the new
        period is being corrected (see :attr:`ChangeReason.CORRECTED_LATE`)."""
        return self.reason == ChangeReason.CORRECTED_LATE.value

    def correct_late(self, now: datetime) -> None:
        """The provider renewed before the change sent ahead of the boundary reached it:
        recorded before the correction goes out."""
        self.reason = ChangeReason.CORRECTED_LATE.value
        self.updated_at = now

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
            "staged_period_end": (
                self.staged_period_end.isoformat() if self.staged_period_end else None
            ),
            "payment_url": self.payment_url,
            "payment_expires_at": (
                self.payment_expires_at.isoformat() if self.payment_expires_at else None
            ),
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
        }
