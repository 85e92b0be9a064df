"""Plan change handlers: decide and persist the change, call the provider outside any
transaction with the change's own idempotency key, record the outcome.

Every change is a row (``domain/scheduled_changes.py``) whose id is derived from the command id,
so a redelivered command finds its change again instead of making another. The provider is
only ever called by :func:`apply_change`, with the key ``{change_id}:apply``: one update call,
whose repetitions the provider replays. It reads the subscription first only when an earlier
attempt may be older than the provider's memory of the key (then the read tells whether it
went through), and after a refusal (to tell an ended subscription from a rejected change).
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import NoReturn

from domain.errors import (
    Internal,
    InvalidArgument,
    NotFound,
    TransientError,
    UniquenessViolation,
    error_info,
)
from domain.plans import Plan
from domain.ports import BillingProvider, Claim, HandlerContext, UnitOfWork
from domain.rate_budget import sweep_quota
from domain.scheduled_changes import (
    ApplyScheduledChange,
    ChangeReason,
    ChangeState,
    ChangeSubscriptionPlan,
    PlanChanged,
    ScheduledChange,
    ScheduledChangeOutcome,
    change_id_for,
)
from domain.subscriptions import ProviderSubscription, Subscription

logger = logging.getLogger(__name__)


def change_subscription_plan(command: ChangeSubscriptionPlan, svc: HandlerContext) -> PlanChanged:
    if command.cancel_upcoming_changes:
        return _cancel_upcoming_changes(command, svc)
    if command.immediate:
        return _change_now(command, svc)
    return _change_at_period_end(command, svc)


def apply_scheduled_change(
    command: ApplyScheduledChange, svc: HandlerContext
) -> ScheduledChangeOutcome:
    """Apply a due change (a change that is finished already is reported as it is)."""
    return ScheduledChangeOutcome(change=apply_change(command.change_id, svc).to_view())


# --- the three requests -----------------------------------------------------------------------


def _change_now(command: ChangeSubscriptionPlan, svc: HandlerContext) -> PlanChanged:
    change_id = change_id_for(command.command_id)
    superseded: list[str] = []
    with svc.unit_of_work() as uow:
        change = uow.scheduled_changes.get(change_id)
        if change is None:  # not a redelivery
            subscription = _subscription_under(uow, command)
            plan = _target_plan(uow, subscription, command)
            now = svc.clock.now()
            superseded = _make_room(uow, subscription, ChangeReason.SUPERSEDED, now)
            change = ScheduledChange.immediate(
                change_id,
                subscription,
                plan,
                proration_behavior=svc.billing.proration_behavior,
                lease=svc.billing.change_lease,
                now=now,
                command_id=command.command_id,
            )
            uow.scheduled_changes.add(change)
            _commit_or_retry(uow, subscription)
    try:
        change = apply_change(change.id, svc)
    except InvalidArgument:
        _restore(superseded, svc)
        raise
    if change.state is not ChangeState.APPLIED:
        _not_applied(change, command, svc)
    return PlanChanged(
        phase=change.phase,
        subscription_id=change.subscription_id,
        change=change.to_view(),
        canceled_changes=superseded,
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
        subscription = _subscription_under(uow, command, lock=False)
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
        subscription = _subscription_under(uow, command, lock=False)
        _target_plan(uow, subscription, command)

    # The period's end as the provider sees it now (outside any transaction).
    remote = svc.billing_provider().get_subscription(subscription.provider_id)

    with svc.unit_of_work() as uow:
        subscription = _subscription_under(uow, command)
        now = svc.clock.now()
        if subscription.synced(remote, now):
            uow.subscriptions.save(subscription)
        if not subscription.state.accepts_plan_changes:
            uow.commit()  # keep what the provider told us, then refuse
            subscription.ensure_accepts_plan_changes()
        plan = _target_plan(uow, subscription, command)
        replaced = _make_room(uow, subscription, ChangeReason.REPLACED, now)
        change = ScheduledChange.at_period_end(
            change_id, subscription, plan, now=now, command_id=command.command_id
        )
        uow.scheduled_changes.add(change)
        _commit_or_retry(uow, subscription)
    logger.info(
        "change %s of %s to %s scheduled for %s",
        change.id,
        subscription.id,
        plan.id,
        change.effective_at.isoformat(),
    )
    return _planned(change, replaced)


def _cancel_upcoming_changes(command: ChangeSubscriptionPlan, svc: HandlerContext) -> PlanChanged:
    """Cancel the pending change; the answer is the phase the subscription is in. Allowed in
    every state: it never reaches the provider."""
    with svc.unit_of_work() as uow:
        subscription = _subscription_under(uow, command)
        canceled = _make_room(uow, subscription, ChangeReason.CANCELED_ON_REQUEST, svc.clock.now())
        uow.commit()
    return PlanChanged(
        phase=subscription.current_phase(),
        subscription_id=subscription.id,
        canceled_changes=canceled,
    )


# --- applying a change ------------------------------------------------------------------------


def apply_change(change_id: str, svc: HandlerContext) -> ScheduledChange:
    """Apply the change at the provider, then locally; returns the change as it ended.

    Safe to run any number of times, also concurrently: the provider sees one update per
    change (one idempotency key, and a read first), and only one run records the outcome.
    """
    with svc.unit_of_work() as uow:
        change, subscription = _locked(uow, change_id)
        if not change.state.is_pending:
            return change
        now = svc.clock.now()
        if change.state is ChangeState.SCHEDULED:  # published without a sweep's claim
            change.ensure_due(now)
            change.claim(now, svc.billing.change_lease)
        if not change.applies_to(subscription.state):
            change.skip(ChangeReason.subscription_in(subscription.state), now)
            uow.scheduled_changes.save(change)
            uow.commit()
            _log_outcome(change)
            return change
        price_id = _price_of(uow, change.target_plan_id)
        read_first = change.outcome_may_be_forgotten(now, svc.billing.provider_idempotency_window)
        change.about_to_send(now)
        uow.scheduled_changes.save(change)
        uow.commit()

    provider = svc.billing_provider()
    try:
        remote = _send_change(provider, change, subscription, price_id, read_first=read_first)
    except InvalidArgument as refusal:
        # Refused: because the subscription ended at the provider (then the change is
        # skipped for that reason), or for good (recorded with the provider's words).
        try:
            remote = provider.get_subscription(subscription.provider_id)
        except InvalidArgument:  # gone at the provider: the refusal stands as it is
            _refused(change_id, refusal, svc)
            raise refusal from None
        if change.applies_to(remote.state):
            _refused(change_id, refusal, svc)
            raise

    with svc.unit_of_work() as uow:
        change, subscription = _locked(uow, change_id)
        if not change.state.is_pending:
            return change  # a concurrent run recorded it first
        now = svc.clock.now()
        if not change.applies_to(remote.state):
            subscription.synced(remote, now)
            change.skip(ChangeReason.subscription_in(remote.state), now)
        else:
            subscription.switched(change.target_plan_id, remote, now)
            change.applied(now)
        uow.subscriptions.save(subscription)
        uow.scheduled_changes.save(change)
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
    """Replace the subscription item's price at the provider: one call, under the change's
    idempotency key, which makes any repetition (a retry, a redelivery, a worker killed
    mid-call) a replay of the first. The subscription is read first only when the update
    cannot be sent blind: its item is not known yet, or an earlier attempt may be older than
    the provider's memory of the key (then the read tells whether it went through)."""
    item_id = subscription.provider_item_id
    if read_first or item_id is None:
        remote = provider.get_subscription(subscription.provider_id)
        if not change.applies_to(remote.state) or remote.price_id == price_id:
            return remote
        item_id = remote.item_id
    return provider.change_subscription_price(
        subscription.provider_id,
        item_id,
        price_id,
        proration_behavior=change.proration_behavior,
        idempotency_key=change.provider_idempotency_key,
    )


def _locked(uow: UnitOfWork, change_id: str) -> tuple[ScheduledChange, Subscription]:
    """The change and its subscription, locked in the order every request locks them
    (subscription first), so that PostgreSQL never sees two transactions wait on each other."""
    peek = uow.scheduled_changes.get(change_id)
    if peek is None:
        raise NotFound.resource("scheduled_change", change_id)
    subscription = _existing_subscription(uow, peek.subscription_id)
    change = uow.scheduled_changes.get(change_id, for_update=True)
    assert change is not None  # changes are never deleted
    return change, subscription


def claim_due_changes(
    svc: HandlerContext,
    batch_size: int,
    *,
    apply_rate: float | None = None,
    horizon_seconds: float = 0.0,
) -> list[Claim]:
    """Take changes that fell due (and those a dead worker left), for beat's sweep; the rest
    wait for the next sweep.

    With an ``apply_rate`` (changes per second the provider's budget allows now), take no more
    than can be applied within ``horizon_seconds``, counting the claimed changes not yet
    applied: the burst is fed to the workers at the provider's pace, and no claim waits in a
    queue until its lease runs out. Without one, take up to ``batch_size``.
    """
    now = svc.clock.now()
    with svc.unit_of_work() as uow:
        limit = batch_size
        if apply_rate is not None:
            limit = sweep_quota(
                rate_per_second=apply_rate,
                horizon_seconds=min(horizon_seconds, svc.billing.change_lease.total_seconds() / 2),
                in_flight=uow.scheduled_changes.count_in_flight(now),
                batch_size=batch_size,
            )
        if limit == 0:
            return []
        claims = uow.scheduled_changes.claim_due(now, now + svc.billing.change_lease, limit)
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


# --- helpers ----------------------------------------------------------------------------------


def _subscription_under(
    uow: UnitOfWork, command: ChangeSubscriptionPlan, *, lock: bool = True
) -> Subscription:
    """The subscription, if it belongs to the billing account of the organization."""
    subscription = uow.subscriptions.get(command.subscription_id, for_update=lock)
    account = uow.billing_accounts.get(command.billing_account_id)
    if (
        subscription is None
        or account is None
        or subscription.billing_account_id != account.id
        or account.org_id != command.org_id
    ):
        raise NotFound.resource("subscription", command.subscription_id)
    return subscription


def _target_plan(
    uow: UnitOfWork, subscription: Subscription, command: ChangeSubscriptionPlan
) -> Plan:
    """The plan asked for, checked against the subscription (404, then 400s)."""
    assert command.plan is not None  # the command's validation guarantees it
    plan = uow.plans.find(command.plan)
    if plan is None:
        raise NotFound.resource("plan", command.plan)
    subscription.ensure_accepts_plan_changes()
    subscription.ensure_not_on(plan)
    plan.ensure_available()
    current = uow.plans.get(subscription.plan_id)
    if current is not None and current.currency != plan.currency:
        raise InvalidArgument.for_fields(
            f"plan {plan.name!r} is billed in {plan.currency}, the subscription in "
            f"{current.currency}",
            [("plan", "must be billed in the subscription's currency")],
        )
    return plan


def _make_room(
    uow: UnitOfWork, subscription: Subscription, reason: ChangeReason, now: datetime
) -> list[str]:
    """Cancel the subscription's scheduled change, if any; wait for one being applied."""
    pending = uow.scheduled_changes.pending_for(subscription.id, for_update=True)
    if pending is None:
        return []
    if pending.state is ChangeState.APPLYING:
        raise TransientError(
            f"change {pending.id} of subscription {subscription.id} is being applied; "
            "trying again once it is done"
        )
    pending.cancel(reason, now)
    uow.scheduled_changes.save(pending)
    return [pending.id]


def _commit_or_retry(uow: UnitOfWork, subscription: Subscription) -> None:
    try:
        uow.commit()
    except UniquenessViolation:
        # A concurrent request made a change of this subscription first; the retry sees it.
        raise TransientError(
            f"another change of subscription {subscription.id} was made concurrently"
        ) from None


def _restore(change_ids: list[str], svc: HandlerContext) -> None:
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
                change.restore(svc.clock.now())
                uow.scheduled_changes.save(change)
        try:
            uow.commit()
        except UniquenessViolation:
            logger.warning("could not restore superseded changes %s", change_ids)


def _refused(change_id: str, refusal: InvalidArgument, svc: HandlerContext) -> None:
    """The provider refused the change for good: it is skipped, with the provider's words."""
    with svc.unit_of_work() as uow:
        change = uow.scheduled_changes.get(change_id, for_update=True)
        if change is None or not change.state.is_pending:
            return
        change.skip(ChangeReason.PROVIDER_REJECTED, svc.clock.now(), refusal.message)
        uow.scheduled_changes.save(change)
        uow.commit()
    _log_outcome(change)


def _existing_subscription(uow: UnitOfWork, subscription_id: str) -> Subscription:
    subscription = uow.subscriptions.get(subscription_id, for_update=True)
    if subscription is None:
        raise NotFound.resource("subscription", subscription_id)
    return subscription


def _price_of(uow: UnitOfWork, plan_id: str) -> str:
    plan = uow.plans.get(plan_id)
    if plan is None or plan.provider_price_id is None:
        raise Internal(
            f"plan {plan_id!r} has no price at the provider",
            details=[error_info("PLAN_WITHOUT_PRICE", plan_id=plan_id)],
        )
    return plan.provider_price_id


def _planned(change: ScheduledChange, canceled: list[str]) -> PlanChanged:
    return PlanChanged(
        phase=change.phase,
        subscription_id=change.subscription_id,
        change=change.to_view(),
        canceled_changes=canceled,
    )


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
    else:
        logger.warning(
            "change %s of %s %s: %s",
            change.id,
            change.subscription_id,
            change.state.value,
            change.reason,
        )
