"""Plan change handlers: decide and persist the change, call the provider outside any
transaction with the change's own idempotency key, record the outcome.

Every change is a row (``domain/subscriptions/scheduled_changes.py``) whose id is derived from
the command id, so a redelivered command finds its change again instead of making another. An
immediate change is applied at once through
:func:`application.handlers.subscriptions.scheduled_changes.apply_change`, the one caller of the
provider's update.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import NoReturn

from application.handlers.subscriptions.change_requests import subscription_under, target_plan
from application.handlers.subscriptions.scheduled_changes import apply_change
from application.handlers.subscriptions.staged_withdrawals import (
    WithdrawStagedChange,
    withdraw_staged_change,
)
from domain.errors import (
    Internal,
    InvalidArgument,
    PaymentFailed,
    TransientError,
    UniquenessViolation,
    error_info,
)
from domain.events.subscriptions import PlanChangeCanceled, PlanChangeReplaced, PlanChangeScheduled
from domain.ports.application import HandlerContext
from domain.ports.repositories import UnitOfWork
from domain.subscriptions.change_commands import (
    ApplyScheduledChange,
    ChangeSubscriptionPlan,
    PlanChanged,
)
from domain.subscriptions.change_previews import IssuedPreview, ensure_previewed
from domain.subscriptions.change_states import ChangeReason, ChangeState
from domain.subscriptions.immediate_changes import immediate_proration
from domain.subscriptions.scheduled_changes import ScheduledChange, change_id_for
from domain.subscriptions.subscription import Subscription

logger = logging.getLogger(__name__)


def change_subscription_plan(command: ChangeSubscriptionPlan, svc: HandlerContext) -> PlanChanged:
    if command.cancel_upcoming_changes:
        return _cancel_upcoming_changes(command, svc)
    if command.immediate:
        return _change_now(command, svc)
    return _change_at_period_end(command, svc)


# --- the three requests -----------------------------------------------------------------------


def _change_now(command: ChangeSubscriptionPlan, svc: HandlerContext) -> PlanChanged:
    change_id = change_id_for(command.command_id)
    superseded: list[str] = []
    with svc.unit_of_work() as uow:
        change = uow.scheduled_changes.get(change_id)
        stored = None if change is not None else subscription_under(uow, command, lock=False)
    if stored is not None and not stored.state.accepts_plan_changes:
        _follow_the_provider(command, svc)  # refuse on what the provider holds, not on us
    withdrawn = [] if stored is None else _withdraw_staged(command, ChangeReason.SUPERSEDED, svc)
    with svc.unit_of_work() as uow:
        change = uow.scheduled_changes.get(change_id)
        if change is None:  # not a redelivery
            subscription = subscription_under(uow, command)
            plan = target_plan(uow, subscription, command)
            now = svc.clock.now()
            if command.proration_date is not None:
                when = command.proration_date
                preview = uow.change_previews.get(
                    IssuedPreview.id_for(subscription.id, subscription.plan_id, plan.id, when)
                )
                ensure_previewed(subscription, plan.id, when, preview, now)
            superseded = _make_room(
                uow, subscription, ChangeReason.SUPERSEDED, now, command.command_id
            )
            change = ScheduledChange.immediate(
                change_id,
                subscription,
                plan,
                proration_behavior=immediate_proration(
                    svc.billing.proration_behavior, uow.plans.get(subscription.plan_id), plan
                ),
                lease=svc.billing.change_lease,
                now=now,
                command_id=command.command_id,
                proration_date=command.proration_date,
            )
            uow.scheduled_changes.add(change)
            _commit_or_retry(uow, subscription)
    try:
        change = apply_change(
            ApplyScheduledChange(command_id=command.command_id, change_id=change.id), svc
        )
    except (InvalidArgument, PaymentFailed):  # nothing was made at the provider
        _restore(superseded, svc, command.command_id)
        raise
    if change.state is ChangeState.AWAITING_PAYMENT:
        # Not in effect yet: the answer is the phase the subscription stays in until the
        # customer pays, and the change with where to pay.
        with svc.unit_of_work() as uow:
            subscription = subscription_under(uow, command, lock=False)
        return PlanChanged(
            phase=subscription.current_phase(),
            subscription_id=subscription.id,
            change=change.to_view(),
            canceled_changes=withdrawn + superseded,
        )
    if change.state is not ChangeState.APPLIED:
        _not_applied(change, command, svc)
    return PlanChanged(
        phase=change.phase,
        subscription_id=change.subscription_id,
        change=change.to_view(),
        canceled_changes=withdrawn + superseded,
    )


def _not_applied(
    change: ScheduledChange, command: ChangeSubscriptionPlan, svc: HandlerContext
) -> NoReturn:
    """Why an immediate change was not made, as the error its request ends with."""
    reason = change.reason or ""
    if reason.startswith(ChangeReason.PROVIDER_REJECTED.value):
        # A redelivery of a request the provider refused before its outcome was recorded.
        raise InvalidArgument.for_fields(
            "the billing provider rejected the change",
            [("plan", reason.removeprefix(f"{ChangeReason.PROVIDER_REJECTED.value}: "))],
        )
    with svc.unit_of_work() as uow:
        subscription = subscription_under(uow, command, lock=False)
    subscription.ensure_accepts_plan_changes()  # it ended at the provider meanwhile
    raise Internal(
        f"change {change.id} ended {change.state.value}: {reason}",
        details=[error_info("CHANGE_NOT_APPLIED", change_id=change.id)],
    )


def _change_at_period_end(command: ChangeSubscriptionPlan, svc: HandlerContext) -> PlanChanged:
    change_id = change_id_for(command.command_id)
    with svc.unit_of_work() as uow:
        existing = uow.scheduled_changes.get(change_id)
        if existing is not None:  # a redelivery: the change was made
            return _planned(existing, [])
        subscription = subscription_under(uow, command, lock=False)
        # The state is judged once the provider is read: a subscription stored past due may
        # have been paid since.
        target_plan(uow, subscription, command, check_state=False)
    withdrawn = _withdraw_staged(command, ChangeReason.REPLACED, svc, check_state=False)

    # The period's end as the provider sees it now (outside any transaction).
    remote = svc.billing_provider().get_subscription(subscription.provider_id)

    with svc.unit_of_work() as uow:
        subscription = subscription_under(uow, command)
        now = svc.clock.now()
        if subscription.synced(remote, now):
            uow.subscriptions.save(subscription)
        if not subscription.state.accepts_plan_changes:
            uow.commit()  # keep what the provider told us, then refuse
            subscription.ensure_accepts_plan_changes()
        plan = target_plan(uow, subscription, command)
        replaced = _make_room(uow, subscription, ChangeReason.REPLACED, now, command.command_id)
        change = ScheduledChange.at_period_end(
            change_id, subscription, plan, now=now, command_id=command.command_id
        )
        uow.scheduled_changes.add(change)
        uow.events.add(
            PlanChangeScheduled.of(
                change, command_id=command.command_id, now=now, subscription=subscription
            )
        )
        _commit_or_retry(uow, subscription)
    logger.info(
        "change %s of %s to %s scheduled for %s",
        change.id,
        subscription.id,
        plan.id,
        change.effective_at.isoformat(),
    )
    return _planned(change, withdrawn + replaced)


def _cancel_upcoming_changes(command: ChangeSubscriptionPlan, svc: HandlerContext) -> PlanChanged:
    """Cancel the pending change; the answer is the phase the subscription is in. Allowed in
    every state; it reaches the provider only to withdraw a change staged there."""
    withdrawn = _withdraw_staged(command, ChangeReason.CANCELED_ON_REQUEST, svc)
    with svc.unit_of_work() as uow:
        subscription = subscription_under(uow, command)
        canceled = withdrawn + _make_room(
            uow,
            subscription,
            ChangeReason.CANCELED_ON_REQUEST,
            svc.clock.now(),
            command.command_id,
        )
        uow.commit()
    return PlanChanged(
        phase=subscription.current_phase(),
        subscription_id=subscription.id,
        canceled_changes=canceled,
    )


# --- helpers ----------------------------------------------------------------------------------


def _follow_the_provider(command: ChangeSubscriptionPlan, svc: HandlerContext) -> None:
    """Read the subscription at the provider and keep what it shows (its state above all)."""
    with svc.unit_of_work() as uow:
        provider_id = subscription_under(uow, command, lock=False).provider_id
    remote = svc.billing_provider().get_subscription(provider_id)
    with svc.unit_of_work() as uow:
        subscription = subscription_under(uow, command)
        if subscription.synced(remote, svc.clock.now()):
            uow.subscriptions.save(subscription)
            uow.commit()


def _withdraw_staged(
    command: ChangeSubscriptionPlan,
    reason: ChangeReason,
    svc: HandlerContext,
    *,
    check_state: bool = True,
) -> list[str]:
    """Take back the subscription's change staged at the provider, if any, once the request
    is known to be acceptable (a bad request withdraws nothing); the id of the change
    withdrawn. A withdrawn change is not restored if the request then fails at the
    provider: it would have to be staged again."""
    with svc.unit_of_work() as uow:
        subscription = subscription_under(uow, command, lock=False)
        if command.plan is not None:
            target_plan(uow, subscription, command, check_state=check_state)
    withdrawn = withdraw_staged_change(
        WithdrawStagedChange(subscription.id, reason, command.command_id), svc
    )
    return [withdrawn.id] if withdrawn is not None else []


def _make_room(
    uow: UnitOfWork,
    subscription: Subscription,
    reason: ChangeReason,
    now: datetime,
    command_id: str,
) -> list[str]:
    """Cancel the subscription's scheduled change, if any; wait for one being applied."""
    pending = uow.scheduled_changes.pending_for(subscription.id, for_update=True)
    if pending is None:
        return []
    pending.ensure_not_staged()
    pending.ensure_not_awaiting_payment()
    if pending.state is ChangeState.APPLYING:
        raise TransientError(
            f"change {pending.id} of subscription {subscription.id} is being applied; "
            "trying again once it is done"
        )
    pending.cancel(reason, now)
    uow.scheduled_changes.save(pending)
    event = PlanChangeReplaced if reason is ChangeReason.REPLACED else PlanChangeCanceled
    uow.events.add(event.of(pending, command_id=command_id, now=now, subscription=subscription))
    return [pending.id]


def _commit_or_retry(uow: UnitOfWork, subscription: Subscription) -> None:
    try:
        uow.commit()
    except UniquenessViolation:
        # A concurrent request made a change of this subscription first; the retry sees it.
        raise TransientError(
            f"another change of subscription {subscription.id} was made concurrently"
        ) from None


def _restore(change_ids: list[str], svc: HandlerContext, command_id: str) -> None:
    """The provider refused the immediate change: the changes it superseded stand again."""
    if not change_ids:
        return
    with svc.unit_of_work() as uow:
        for change_id in change_ids:
            change = uow.scheduled_changes.get(change_id, for_update=True)
            if (
                change is not None
                and change.state is ChangeState.CANCELED
                and change.reason == ChangeReason.SUPERSEDED.value
                and uow.scheduled_changes.pending_for(change.subscription_id) is None
            ):
                now = svc.clock.now()
                change.restore(now)
                uow.scheduled_changes.save(change)
                # It stands again: receivers told of its cancellation hear it is scheduled.
                uow.events.add(PlanChangeScheduled.of(change, command_id=command_id, now=now))
        try:
            uow.commit()
        except UniquenessViolation:
            logger.warning("could not restore superseded changes %s", change_ids)


def _planned(change: ScheduledChange, canceled: list[str]) -> PlanChanged:
    return PlanChanged(
        phase=change.phase,
        subscription_id=change.subscription_id,
        change=change.to_view(),
        canceled_changes=canceled,
    )
