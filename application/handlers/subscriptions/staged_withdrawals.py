"""Taking back a change staged at the provider: :func:`withdraw_staged_change`, a step of the
request that replaces, cancels or supersedes it (asked with a :class:`WithdrawStagedChange`),
and :func:`finish_staged_withdrawal`, beat's, for a withdrawal that request gave up.

The item goes back to the price it had under the key ``{change_id}:withdraw``, corrected the
same way as a late change (``application/handlers/subscriptions/scheduled_changes.py``) if the
write arrived after the provider renewed: each write under its own key, whose repetitions the
provider replays.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from application.handlers.subscriptions.change_steps import correct_renewal, locked_change, price_of
from domain.errors import InvalidArgument, found
from domain.events.subscriptions import PlanChangeCanceled, PlanChangeReplaced
from domain.ports.application import HandlerContext
from domain.ports.repositories import UnitOfWork
from domain.subscriptions.change_commands import FinishStagedWithdrawal, ScheduledChangeOutcome
from domain.subscriptions.change_states import ChangeReason, ChangeState
from domain.subscriptions.period_end import renewed_since, withdrawal
from domain.subscriptions.scheduled_changes import ScheduledChange
from domain.subscriptions.subscription import Subscription

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class WithdrawStagedChange:
    """Take back the subscription's change staged at the provider, on behalf of the command
    ``command_id`` that replaces, cancels or supersedes it for ``reason``. A step of that
    command's handler, never queued on its own."""

    subscription_id: str
    reason: ChangeReason
    command_id: str


def withdraw_staged_change(
    request: WithdrawStagedChange, svc: HandlerContext
) -> ScheduledChange | None:
    """Take back the subscription's change staged at the provider, for a request that
    replaces, cancels or supersedes it; returns it canceled (for ``reason``), or ``None``
    when no change is staged.

    Allowed until ``staged_change_guard`` before its boundary (else ``400 CHANGE_ALREADY_STAGED``):
    the item goes back to the price it had, without proration, under the change's withdrawal key. If
    the provider renewed before that write reached it (held across the boundary), the renewal billed
    the staged price: the new period is corrected to the old one
    (:func:`domain.subscriptions.period_end.renewal_correction`). Meanwhile the change is held (a
    lease): it does not take effect here at its boundary, and a retry of the request sends the same
    writes again (replays). A request that gives up leaves it held: beat finishes the withdrawal
    (:func:`finish_staged_withdrawal`)."""
    with svc.unit_of_work() as uow:
        pending = uow.scheduled_changes.pending_for(request.subscription_id)
        if pending is None or pending.state is not ChangeState.STAGED:
            return None
        held = _hold(uow, pending.id, svc)
    if held is None:
        return None
    return _take_back(held, request.reason, request.command_id, svc)


def finish_staged_withdrawal(
    command: FinishStagedWithdrawal, svc: HandlerContext
) -> ScheduledChangeOutcome:
    """Finish the withdrawal of a staged change that the request which began it gave up: its
    write may have reached the provider (its answer lost), so the change may not take effect
    here; the same writes go again under the same keys (replays of those that went through),
    and the change ends ``canceled`` (``withdrawal_finished``). A change no longer held (a
    redelivered request finished it, or the provider refused) is reported as it is."""
    with svc.unit_of_work() as uow:
        held = _hold(uow, command.change_id, svc, only_if_held=True)
        if held is None:
            change = found(
                uow.scheduled_changes.get(command.change_id), "scheduled_change", command.change_id
            )
            return ScheduledChangeOutcome(change=change.to_view())
    finished = _take_back(held, ChangeReason.WITHDRAWAL_FINISHED, command.command_id, svc)
    return ScheduledChangeOutcome(change=(finished or held.change).to_view())


@dataclass(frozen=True)
class _Held:
    """A staged change held for its withdrawal, with what the writes need."""

    change: ScheduledChange
    subscription: Subscription
    from_price_id: str
    staged_price_id: str


def _hold(
    uow: UnitOfWork, change_id: str, svc: HandlerContext, *, only_if_held: bool = False
) -> _Held | None:
    """Lock the change and hold it for its withdrawal (a lease, renewed if it is held
    already), committed before any provider call; ``None`` when it is no longer staged, or
    (``only_if_held``) not held for a withdrawal."""
    change, subscription = locked_change(uow, change_id)
    if change.state is not ChangeState.STAGED or (only_if_held and not change.is_withdrawing):
        return None
    change.begin_withdrawal(
        svc.clock.now(), svc.billing.staged_change_guard, svc.billing.change_lease
    )
    held = _Held(
        change,
        subscription,
        from_price_id=price_of(uow, change.from_plan_id),
        staged_price_id=price_of(uow, change.target_plan_id),
    )
    uow.scheduled_changes.save(change)
    uow.commit()
    return held


def _take_back(
    held: _Held, reason: ChangeReason, command_id: str, svc: HandlerContext
) -> ScheduledChange | None:
    """The withdrawal's writes, then its record: the change canceled for ``reason`` (``None``
    when a concurrent request recorded it first)."""
    change, subscription = held.change, held.subscription
    provider = svc.billing_provider()
    write = withdrawal(change, held.from_price_id)
    try:
        item_id = subscription.provider_item_id
        if item_id is None:
            item_id = provider.get_subscription(subscription.provider_id).item_id
        remote = provider.change_subscription_price(
            subscription.provider_id,
            item_id,
            write.price_id,
            proration_behavior=write.proration_behavior,
            idempotency_key=write.idempotency_key,
        )
    except InvalidArgument:
        _withdrawal_refused(change.id, svc)
        raise
    if renewed_since(remote, change.effective_at):
        remote = correct_renewal(
            provider,
            change,
            subscription,
            remote,
            billed_price_id=held.staged_price_id,
            wanted_price_id=held.from_price_id,
            keys=(change.withdrawal_realign_key, change.withdrawal_correction_key),
            what="the withdrawal",
        )

    with svc.unit_of_work() as uow:
        change, subscription = locked_change(uow, change.id)
        if change.state is not ChangeState.STAGED:
            return None  # a concurrent request withdrew it first
        now = svc.clock.now()
        subscription.synced(remote, now)
        change.cancel(reason, now)
        uow.subscriptions.save(subscription)
        uow.scheduled_changes.save(change)
        event = PlanChangeReplaced if reason is ChangeReason.REPLACED else PlanChangeCanceled
        uow.events.add(event.of(change, command_id=command_id, now=now, subscription=subscription))
        uow.commit()
    logger.info(
        "change %s of %s withdrawn at the provider (%s)",
        change.id,
        change.subscription_id,
        reason.value,
    )
    return change


def _withdrawal_refused(change_id: str, svc: HandlerContext) -> None:
    with svc.unit_of_work() as uow:
        change = uow.scheduled_changes.get(change_id, for_update=True)
        if change is None or not change.is_withdrawing:
            return
        change.withdrawal_refused(svc.clock.now())
        uow.scheduled_changes.save(change)
        uow.commit()
