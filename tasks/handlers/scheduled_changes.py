"""Applying plan changes: the one place the provider is told of a change, beat's claims of
changes that fell due, and staged changes taking effect at their boundary.

The provider is told of a change by :func:`apply_change`, with the key ``{change_id}:apply``
(``{change_id}:apply-late`` for the correction of a change made after the provider renewed,
after ``{change_id}:realign-late`` when the on-time write itself arrived after the renewal),
and a staged change is taken back by :func:`withdraw_staged_change` (``{change_id}:withdraw``,
corrected the same way if it arrived after the renewal): each write under its own key, whose
repetitions the provider replays.

* An immediate change is sent blind; the subscription is read first only when an earlier
  attempt may be older than the provider's memory of the key (then the read tells whether it
  went through), and after a refusal (to tell an ended subscription from a rejected change).
* A change at the period's end is claimed ``period_end_lead`` before its boundary; the
  subscription is always read first, and ``domain/period_end.py`` decides on what it shows.
  Made ahead of the boundary, the change is ``staged``; beat's sweep makes it take effect here
  (plan and period) once the boundary passes, without calling the provider again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from domain.errors import (
    CommandError,
    Internal,
    InvalidArgument,
    PaymentFailed,
    error_info,
    found,
)
from domain.event_base import Event
from domain.period_end import (
    PeriodEndStep,
    PriceWrite,
    Step,
    period_end_step,
    renewal_correction,
    renewed_since,
    staged_too_late,
    withdrawal,
)
from domain.ports import HandlerContext
from domain.provider_ports import BillingProvider
from domain.rate_budget import sweep_quota
from domain.repositories import Claim, UnitOfWork
from domain.scheduled_changes import (
    ApplyScheduledChange,
    ChangeKind,
    ChangeReason,
    ChangeState,
    ScheduledChange,
    ScheduledChangeOutcome,
)
from domain.subscription_events import (
    PlanChangeApplied,
    PlanChangeCanceled,
    PlanChangeReplaced,
    PlanChangeScheduled,
    PlanChangeSkipped,
    SubscriptionPlanChanged,
)
from domain.subscriptions import ProviderSubscription, Subscription
from domain.sweeps import ClaimDueChanges, TakeEffectOfStagedChanges

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
        change, subscription = _locked(uow, change_id)
        if change.state not in (ChangeState.SCHEDULED, ChangeState.APPLYING):
            return change
        now = svc.clock.now()
        if change.state is ChangeState.SCHEDULED:  # published without a sweep's claim
            change.ensure_due(now, svc.billing.period_end_lead)
            change.claim(now, svc.billing.change_lease)
        if not change.applies_to(subscription.state):
            change.skip(ChangeReason.subscription_in(subscription.state), now)
            uow.scheduled_changes.save(change)
            _record_outcome(uow, change, subscription, command_id, now)
            uow.commit()
            _log_outcome(change)
            return change
        price_id = _price_of(uow, change.target_plan_id)
        from_price_id = (
            _price_of(uow, change.from_plan_id) if change.kind is ChangeKind.END_OF_PERIOD else ""
        )
        interval_changes = _interval_changes(uow, change)
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
            interval_changes=interval_changes,
        )
    provider = svc.billing_provider()
    try:
        remote = _send_change(provider, change, subscription, price_id, read_first=read_first)
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
    holds (``domain/period_end.py``), send if needed, record. ``prices``: the price the
    change leaves and the one it makes."""
    from_price_id, price_id = prices
    provider = svc.billing_provider()
    try:
        remote = provider.get_subscription(subscription.provider_id)
    except InvalidArgument as refusal:  # gone at the provider
        _refused(change.id, refusal, svc, command_id)
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
    if step.correct_renewal:
        logger.warning(
            "change %s of %s reached the provider after it renewed at the old price: "
            "correcting the period from %s",
            change.id,
            change.subscription_id,
            remote.current_period_start.isoformat(),
        )
        remote = _send_writes(
            provider,
            subscription.provider_id,
            remote,
            renewal_correction(
                remote,
                billed_price_id=from_price_id,
                wanted_price_id=price_id,
                realign_key=change.late_realign_key,
                correction_key=change.late_correction_key,
            ),
        )
    if step.step is Step.APPLY:
        return _record_sent(change.id, remote, price_id, svc, command_id)

    with svc.unit_of_work() as uow:
        change, subscription = _locked(uow, change.id)
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
            _record_outcome(uow, change, subscription, command_id, now)
        elif event is not None:
            uow.events.add(event)
        uow.commit()
    _log_outcome(change)
    return change


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

    Allowed until ``staged_change_guard`` before its boundary (else ``400
    CHANGE_ALREADY_STAGED``): the item goes back to the price it had, without proration,
    under the change's withdrawal key. If the provider renewed before that write reached it
    (held across the boundary), the renewal billed the staged price: the new period is
    corrected to the old one (:func:`domain.period_end.renewal_correction`). Meanwhile the
    change is held (a lease): it does not take effect here at its boundary, and a retry of
    the request sends the same writes again (replays)."""
    with svc.unit_of_work() as uow:
        pending = uow.scheduled_changes.pending_for(request.subscription_id)
        if pending is None or pending.state is not ChangeState.STAGED:
            return None
        change, subscription = _locked(uow, pending.id)
        if change.state is not ChangeState.STAGED:
            return None
        change.begin_withdrawal(
            svc.clock.now(), svc.billing.staged_change_guard, svc.billing.change_lease
        )
        from_price_id = _price_of(uow, change.from_plan_id)
        staged_price_id = _price_of(uow, change.target_plan_id)
        uow.scheduled_changes.save(change)
        uow.commit()

    provider = svc.billing_provider()
    write = withdrawal(change, from_price_id)
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
        logger.warning(
            "withdrawal of change %s of %s reached the provider after it renewed at the "
            "staged price: correcting the period from %s",
            change.id,
            change.subscription_id,
            remote.current_period_start.isoformat(),
        )
        remote = _send_writes(
            provider,
            subscription.provider_id,
            remote,
            renewal_correction(
                remote,
                billed_price_id=staged_price_id,
                wanted_price_id=from_price_id,
                realign_key=change.withdrawal_realign_key,
                correction_key=change.withdrawal_correction_key,
            ),
        )

    with svc.unit_of_work() as uow:
        change, subscription = _locked(uow, change.id)
        if change.state is not ChangeState.STAGED:
            return None  # a concurrent request withdrew it first
        now = svc.clock.now()
        subscription.synced(remote, now)
        change.cancel(request.reason, now)
        uow.subscriptions.save(subscription)
        uow.scheduled_changes.save(change)
        event = (
            PlanChangeReplaced if request.reason is ChangeReason.REPLACED else PlanChangeCanceled
        )
        uow.events.add(
            event.of(change, command_id=request.command_id, now=now, subscription=subscription)
        )
        uow.commit()
    logger.info(
        "change %s of %s withdrawn at the provider (%s)",
        change.id,
        change.subscription_id,
        request.reason.value,
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


def _send_writes(
    provider: BillingProvider,
    provider_id: str,
    remote: ProviderSubscription,
    writes: list[PriceWrite],
) -> ProviderSubscription:
    """Send the price writes in order, each under its own key; returns the last answer."""
    for write in writes:
        remote = provider.change_subscription_price(
            provider_id,
            remote.item_id,
            write.price_id,
            proration_behavior=write.proration_behavior,
            proration_date=write.proration_date,
            idempotency_key=write.idempotency_key,
        )
    return remote


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
    except InvalidArgument:  # gone at the provider: the refusal stands as it is
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
        change, subscription = _locked(uow, change_id)
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
        _record_outcome(uow, change, subscription, command_id, now)
        uow.commit()
    _log_outcome(change)
    return change


def _send_change(
    provider: BillingProvider,
    change: ScheduledChange,
    subscription: Subscription,
    price_id: str,
    *,
    read_first: bool,
) -> ProviderSubscription:
    """Replace the subscription item's price at the provider now: one call, under the
    change's idempotency key, which makes any repetition (a retry, a redelivery, a worker
    killed mid-call) a replay of the first. Prorated as of the change's ``effective_at``; when
    the proration is invoiced at once, nothing is made unless the invoice is paid. The
    subscription is read first only when the update cannot be sent blind: its item is not
    known yet, or an earlier attempt may be older than the provider's memory of the key
    (then the read tells whether it went through)."""
    item_id = subscription.provider_item_id
    if read_first or item_id is None:
        remote = provider.get_subscription(subscription.provider_id)
        if not change.applies_to(remote.state) or remote.price_id == price_id:
            return remote
        item_id = remote.item_id
    prorated = change.proration_behavior != "none"
    return provider.change_subscription_price(
        subscription.provider_id,
        item_id,
        price_id,
        proration_behavior=change.proration_behavior,
        idempotency_key=change.provider_idempotency_key,
        proration_date=change.effective_at if prorated else None,
        payment_behavior=(
            "error_if_incomplete" if change.proration_behavior == "always_invoice" else None
        ),
    )


def _locked(uow: UnitOfWork, change_id: str) -> tuple[ScheduledChange, Subscription]:
    """The change and its subscription, locked in the order every request locks them
    (subscription first), so that PostgreSQL never sees two transactions wait on each other."""
    peek = found(uow.scheduled_changes.get(change_id), "scheduled_change", change_id)
    subscription = _existing_subscription(uow, peek.subscription_id)
    change = uow.scheduled_changes.get(change_id, for_update=True)
    assert change is not None  # changes are never deleted
    return change, subscription


def take_effect_of_staged_changes(sweep: TakeEffectOfStagedChanges, svc: HandlerContext) -> int:
    """Staged changes whose boundary passed take effect here: the subscription moves to the
    new plan and period, and the change is ``applied`` (its lag counted from the boundary).
    No provider call: the provider holds the new price since the change was staged. One
    transaction per batch, each subscription locked before its change (the order every
    request locks them in)."""
    now = svc.clock.now()
    with svc.unit_of_work() as uow:
        due = uow.scheduled_changes.staged_due(now, sweep.batch_size)
        for change_id in due:
            change, subscription = _locked(uow, change_id)
            if change.state is not ChangeState.STAGED or (
                change.is_withdrawing
                and change.lease_until is not None
                and change.lease_until >= now
            ):
                continue
            period_end = change.staged_period_end or subscription.current_period_end
            subscription.entered_period(change.target_plan_id, change.effective_at, period_end, now)
            change.applied(now)
            uow.subscriptions.save(subscription)
            uow.scheduled_changes.save(change)
            _record_outcome(uow, change, subscription, change.command_id, now)
        uow.commit()
    if due:
        logger.info("%d staged plan changes took effect", len(due))
    return len(due)


def claim_due_changes(sweep: ClaimDueChanges, svc: HandlerContext) -> list[Claim]:
    """Take changes that fell due (and those a dead worker left), for beat's sweep; the rest
    wait for the next sweep.

    With an ``apply_rate`` (changes per second the provider's budget allows now), take no more
    than can be applied within ``horizon_seconds``, counting the claimed changes not yet
    applied: the burst is fed to the workers at the provider's pace, and no claim waits in a
    queue until its lease runs out. Without one, take up to ``batch_size``.
    """
    batch_size, apply_rate = sweep.batch_size, sweep.apply_rate
    now = svc.clock.now()
    with svc.unit_of_work() as uow:
        limit = batch_size
        if apply_rate is not None:
            limit = sweep_quota(
                rate_per_second=apply_rate,
                horizon_seconds=min(
                    sweep.horizon_seconds, svc.billing.change_lease.total_seconds() / 2
                ),
                in_flight=uow.scheduled_changes.count_in_flight(now),
                batch_size=batch_size,
            )
        if limit == 0:
            return []
        claims = uow.scheduled_changes.claim_due(
            now, now + svc.billing.change_lease, limit, lead=svc.billing.period_end_lead
        )
        uow.commit()
    return claims


def release_claim(claim: Claim, svc: HandlerContext) -> None:
    """The apply command could not be published: let the next sweep take the change."""
    with svc.unit_of_work() as uow:
        uow.scheduled_changes.release(claim, svc.clock.now())
        uow.commit()


def apply_command_for(claim: Claim) -> ApplyScheduledChange:
    """One command per claim: duplicates of a claim's message are one command in the log,
    and a change claimed again (its worker died) gets a command of its own."""
    return ApplyScheduledChange(
        command_id=f"apply:{claim.change_id}:{claim.number}", change_id=claim.change_id
    )


def _record_outcome(
    uow: UnitOfWork,
    change: ScheduledChange,
    subscription: Subscription | None,
    command_id: str | None,
    now: datetime,
) -> None:
    """The event of how the change ended: made now (an immediate change), applied at the
    period's end, or skipped."""
    if change.state is ChangeState.APPLIED:
        applied = (
            SubscriptionPlanChanged if change.kind is ChangeKind.IMMEDIATE else PlanChangeApplied
        )
        event: Event = applied.of(change, command_id=command_id, now=now, subscription=subscription)
    else:
        event = PlanChangeSkipped.of(
            change, command_id=command_id, now=now, subscription=subscription
        )
    uow.events.add(event)


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
        _record_outcome(uow, change, None, command_id, now)
        uow.commit()
    _log_outcome(change)


def _existing_subscription(uow: UnitOfWork, subscription_id: str) -> Subscription:
    subscription = found(
        uow.subscriptions.get(subscription_id, for_update=True), "subscription", subscription_id
    )
    return subscription


def _interval_changes(uow: UnitOfWork, change: ScheduledChange) -> bool:
    """Whether the change moves to a plan billed at another interval (month → year)."""
    current, target = uow.plans.get(change.from_plan_id), uow.plans.get(change.target_plan_id)
    return current is not None and target is not None and current.interval != target.interval


def _price_of(uow: UnitOfWork, plan_id: str) -> str:
    plan = uow.plans.get(plan_id)
    if plan is None or plan.provider_price_id is None:
        raise Internal(
            f"plan {plan_id!r} has no price at the provider",
            details=[error_info("PLAN_WITHOUT_PRICE", plan_id=plan_id)],
        )
    return plan.provider_price_id


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
