"""Applying plan changes: the one place the provider is told of a change.

The provider is told of a change by :func:`apply_change`, with the key ``{change_id}:apply``
(``{change_id}:apply-late`` for the correction of a change made after the provider renewed,
after ``{change_id}:realign-late`` when the on-time write itself arrived after the renewal):
each write under its own key, whose repetitions the provider replays. (A staged change is taken
back by ``application/handlers/subscriptions/staged_withdrawals.py``; beat claims due changes
and makes staged ones take effect in ``application/handlers/subscriptions/due_changes.py``.)

* An immediate change is sent blind; the subscription is read first only when an earlier
  attempt may be older than the provider's memory of the key (then the read tells whether it
  went through), and after a refusal (to tell an ended subscription from a rejected change).
* A change at the period's end is claimed ``period_end_lead`` before its boundary; the
  subscription is always read first, and ``domain/subscriptions/period_end.py`` decides on what it
  shows (and, when it shows the new price in a renewed period, on what the renewal invoice
  billed: a write whose answer was lost may have reached the provider after it renewed).
  Made ahead of the boundary, the change is ``staged``; beat's sweep makes it take effect
  (``application/handlers/subscriptions/due_changes.py``) once the boundary passes, without
  calling the provider again.
"""

from __future__ import annotations

import logging

from application.handlers.subscriptions.change_steps import (
    correct_renewal,
    interval_changes,
    locked_change,
    price_of,
    record_outcome,
)
from application.handlers.subscriptions.immediate_writes import (
    send_as_pending_update,
    send_change,
)
from domain.errors import (
    CommandError,
    GoneAtProvider,
    InvalidArgument,
    PaymentActionRequired,
    PaymentFailed,
)
from domain.events.base import Event
from domain.events.subscriptions import PlanChangeAwaitingPayment, PlanChangeScheduled
from domain.ports.application import HandlerContext
from domain.ports.provider import BillingProvider
from domain.subscriptions.change_commands import ApplyScheduledChange, ScheduledChangeOutcome
from domain.subscriptions.change_states import ChangeKind, ChangeReason, ChangeState
from domain.subscriptions.period_end import (
    PeriodEndStep,
    Step,
    billed_at_the_old_price,
    period_end_step,
    staged_too_late,
)
from domain.subscriptions.renewals import RENEWAL_INVOICES
from domain.subscriptions.scheduled_changes import ScheduledChange
from domain.subscriptions.subscription import ProviderSubscription, Subscription

logger = logging.getLogger(__name__)


def apply_scheduled_change(
    command: ApplyScheduledChange, svc: HandlerContext
) -> ScheduledChangeOutcome:
    """Apply a due change (a change that is finished already is reported as it is)."""
    return ScheduledChangeOutcome(change=apply_change(command, svc).to_view())


def apply_change(command: ApplyScheduledChange, svc: HandlerContext) -> ScheduledChange:
    """Make the change at the provider, then record it here; returns the change as it ended
    (or as it waits: ``staged`` until its boundary, ``scheduled`` again if the boundary
    moved).

    Safe to run any number of times, also concurrently: the provider sees one update per
    change (one idempotency key, and a read first), and only one run records the outcome.
    """
    change_id, command_id = command.change_id, command.command_id
    with svc.unit_of_work() as uow:
        change, subscription = locked_change(uow, change_id)
        if change.state not in (ChangeState.SCHEDULED, ChangeState.APPLYING):
            return change
        now = svc.clock.now()
        if change.state is ChangeState.SCHEDULED:  # published without a sweep's claim
            change.ensure_due(now, svc.billing.period_end_lead)
            change.claim(now, svc.billing.change_lease)
        if change.ends_skipped_for(subscription.state):
            change.skip(ChangeReason.subscription_in(subscription.state), now)
            uow.scheduled_changes.save(change)
            record_outcome(uow, change, subscription, command_id, now)
            uow.commit()
            _log_outcome(change)
            return change
        price_id = price_of(uow, change.target_plan_id)
        from_price_id = (
            price_of(uow, change.from_plan_id) if change.kind is ChangeKind.END_OF_PERIOD else ""
        )
        another_interval = interval_changes(uow, change)
        read_first = change.outcome_may_be_forgotten(now, svc.billing.provider_idempotency_window)
        change.about_to_send(now)
        uow.scheduled_changes.save(change)
        uow.commit()

    if change.kind is ChangeKind.END_OF_PERIOD:
        return _reach_the_boundary(
            change,
            subscription,
            (from_price_id, price_id),
            svc,
            command_id,
            interval_changes=another_interval,
        )
    provider = svc.billing_provider()
    try:
        remote = send_change(provider, change, subscription, price_id, read_first=read_first)
    except PaymentActionRequired as needs_action:
        try:
            remote = send_as_pending_update(provider, change, subscription, price_id)
        except (InvalidArgument, PaymentFailed) as refusal:  # it cannot be held either
            _refused(change_id, needs_action, svc, command_id, ChangeReason.PAYMENT_FAILED)
            raise needs_action from refusal
        if remote.pending_price_id == price_id:
            return _record_awaiting_payment(change_id, remote, svc, command_id)
    except PaymentFailed as declined:
        _refused(change_id, declined, svc, command_id, ChangeReason.PAYMENT_FAILED)
        raise
    except InvalidArgument as refusal:
        remote = _after_refusal(provider, subscription, change, refusal, svc, command_id)
    return _record_sent(change_id, remote, price_id, svc, command_id)


def _reach_the_boundary(
    change: ScheduledChange,
    subscription: Subscription,
    prices: tuple[str, str],
    svc: HandlerContext,
    command_id: str,
    *,
    interval_changes: bool,
) -> ScheduledChange:
    """A change at the period's end: read the subscription, decide on what the provider
    holds (``domain/subscriptions/period_end.py``), send if needed, record. ``prices``: the price
    the change leaves and the one it makes."""
    from_price_id, price_id = prices
    provider = svc.billing_provider()
    try:
        remote = provider.get_subscription(subscription.provider_id)
    except GoneAtProvider as gone:  # the subscription is gone there, and the change with it
        _refused(change.id, gone, svc, command_id)
        raise
    step = period_end_step(change, remote, price_id, interval_changes=interval_changes)
    if step.send:
        try:
            remote = provider.change_subscription_price(
                subscription.provider_id,
                remote.item_id,
                price_id,
                proration_behavior=step.proration_behavior,
                proration_date=step.proration_date,
                idempotency_key=step.idempotency_key,
            )
        except InvalidArgument as refusal:
            remote = _after_refusal(provider, subscription, change, refusal, svc, command_id)
            step = period_end_step(change, remote, price_id, interval_changes=interval_changes)
        else:
            if step.step is Step.STAGE and staged_too_late(change, remote):
                _mark_corrected_late(change.id, svc)
                step = PeriodEndStep(Step.APPLY, correct_renewal=True)
    billed_price_id = from_price_id
    if step.check_renewal:
        invoices = provider.list_billed_invoices(subscription.provider_id, RENEWAL_INVOICES)
        billed_otherwise = billed_at_the_old_price(remote, invoices, price_id)
        if billed_otherwise is not None:
            _mark_corrected_late(change.id, svc)
            step = PeriodEndStep(Step.APPLY, correct_renewal=True)
            billed_price_id = billed_otherwise
    if step.correct_renewal:
        remote = correct_renewal(
            provider,
            change,
            subscription,
            remote,
            billed_price_id=billed_price_id,
            wanted_price_id=price_id,
            keys=(change.late_realign_key, change.late_correction_key),
            what="the write",
        )
    if step.step is Step.APPLY:
        return _record_sent(change.id, remote, price_id, svc, command_id)

    with svc.unit_of_work() as uow:
        change, subscription = locked_change(uow, change.id)
        if change.state is not ChangeState.APPLYING:
            return change  # a concurrent run recorded it first
        now = svc.clock.now()
        subscription.synced(remote, now)
        event: Event | None = None
        if step.step is Step.SKIP:
            assert step.reason is not None
            change.skip(step.reason, now)
        elif step.step is Step.RESCHEDULE:
            assert step.effective_at is not None
            change.reschedule(step.effective_at, now)
            event = PlanChangeScheduled.of(
                change, command_id=command_id, now=now, subscription=subscription
            )
        else:
            change.stage(remote.next_period_end(change.effective_at), now)
        uow.subscriptions.save(subscription)
        uow.scheduled_changes.save(change)
        if step.step is Step.SKIP:
            record_outcome(uow, change, subscription, command_id, now)
        elif event is not None:
            uow.events.add(event)
        uow.commit()
    _log_outcome(change)
    return change


def _mark_corrected_late(change_id: str, svc: HandlerContext) -> None:
    """Record, before the correction goes out, that the provider renewed before the change
    reached it: a retry whose read finds the new price corrects too."""
    with svc.unit_of_work() as uow:
        change = uow.scheduled_changes.get(change_id, for_update=True)
        if change is None or change.state is not ChangeState.APPLYING:
            return
        change.correct_late(svc.clock.now())
        uow.scheduled_changes.save(change)
        uow.commit()


def _after_refusal(
    provider: BillingProvider,
    subscription: Subscription,
    change: ScheduledChange,
    refusal: InvalidArgument,
    svc: HandlerContext,
    command_id: str,
) -> ProviderSubscription:
    """The provider refused the change: because the subscription ended there (then the
    subscription as it is, for the change to be skipped for that reason), or for good (the
    change is skipped with the provider's words, and the refusal raised)."""
    try:
        remote = provider.get_subscription(subscription.provider_id)
    except InvalidArgument:  # gone there, or the read refused too: the refusal stands as it is
        _refused(change.id, refusal, svc, command_id)
        raise refusal from None
    if change.applies_to(remote.state):
        _refused(change.id, refusal, svc, command_id)
        raise refusal
    return remote


def _record_sent(
    change_id: str,
    remote: ProviderSubscription,
    price_id: str,
    svc: HandlerContext,
    command_id: str,
) -> ScheduledChange:
    """Record what the provider holds: the change is applied when its item has the target
    price, whatever the subscription's status (which is synced as it is); otherwise it is
    skipped, for the subscription's state or as refused."""
    with svc.unit_of_work() as uow:
        change, subscription = locked_change(uow, change_id)
        if change.state is not ChangeState.APPLYING:
            return change  # a concurrent run recorded it first
        now = svc.clock.now()
        if remote.price_id == price_id:
            if (
                change.kind is ChangeKind.END_OF_PERIOD
                and remote.current_period_start < change.effective_at
            ):
                # The provider restarted the cycle (another interval) when it made the
                # change ahead of its boundary: the new phase began then. (An immediate
                # change began when it was made, within the period that goes on.)
                change.effective_at = remote.current_period_start
            subscription.switched(change.target_plan_id, remote, now)
            change.applied(now)
        elif not change.applies_to(remote.state):
            subscription.synced(remote, now)
            change.skip(ChangeReason.subscription_in(remote.state), now)
        else:
            subscription.synced(remote, now)
            change.skip(
                ChangeReason.PROVIDER_REJECTED,
                now,
                f"the provider kept price {remote.price_id} (status {remote.status})",
            )
        uow.subscriptions.save(subscription)
        uow.scheduled_changes.save(change)
        record_outcome(uow, change, subscription, command_id, now)
        uow.commit()
    _log_outcome(change)
    return change


def _record_awaiting_payment(
    change_id: str, remote: ProviderSubscription, svc: HandlerContext, command_id: str
) -> ScheduledChange:
    """The provider holds the change until the customer pays: recorded, with where to pay,
    and announced; the subscription's next sync settles it
    (``application/handlers/provider/sync.py``)."""
    with svc.unit_of_work() as uow:
        change, subscription = locked_change(uow, change_id)
        if change.state is not ChangeState.APPLYING:
            return change  # a concurrent run recorded it first
        now = svc.clock.now()
        subscription.synced(remote, now)
        change.await_payment(remote.payment_url, remote.pending_expires_at, now)
        uow.subscriptions.save(subscription)
        uow.scheduled_changes.save(change)
        uow.events.add(
            PlanChangeAwaitingPayment.of(
                change, command_id=command_id, now=now, subscription=subscription
            )
        )
        uow.commit()
    logger.info(
        "change %s of %s awaits the customer's payment until %s",
        change.id,
        change.subscription_id,
        change.payment_expires_at.isoformat() if change.payment_expires_at else "?",
    )
    return change


def _refused(
    change_id: str,
    refusal: CommandError,
    svc: HandlerContext,
    command_id: str,
    reason: ChangeReason = ChangeReason.PROVIDER_REJECTED,
) -> None:
    """The provider refused the change for good: it is skipped, with the provider's words."""
    with svc.unit_of_work() as uow:
        change = uow.scheduled_changes.get(change_id, for_update=True)
        if change is None or not change.state.is_pending:
            return
        now = svc.clock.now()
        change.skip(reason, now, refusal.message)
        uow.scheduled_changes.save(change)
        record_outcome(uow, change, None, command_id, now)
        uow.commit()
    _log_outcome(change)


def _log_outcome(change: ScheduledChange) -> None:
    if change.state is ChangeState.APPLIED:
        logger.info(
            "change %s of %s applied: plan %s, effective %s, lag %.3fs",
            change.id,
            change.subscription_id,
            change.target_plan_id,
            change.effective_at.isoformat(),
            change.apply_lag_seconds or 0.0,
        )
    elif change.state is ChangeState.STAGED:
        logger.info(
            "change %s of %s staged at the provider: plan %s from %s",
            change.id,
            change.subscription_id,
            change.target_plan_id,
            change.effective_at.isoformat(),
        )
    elif change.state is ChangeState.SCHEDULED:
        logger.info(
            "change %s of %s moved with the provider's period: now due %s",
            change.id,
            change.subscription_id,
            change.effective_at.isoformat(),
        )
    else:
        logger.warning(
            "change %s of %s %s: %s",
            change.id,
            change.subscription_id,
            change.state.value,
            change.reason,
        )
