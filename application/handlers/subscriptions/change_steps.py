"""Pieces the plan-change handlers share (applying a change, withdrawing a staged one, and
beat's taking effect of staged changes): the change and its subscription locked in the one
order every request takes them, a plan's price at the provider, the price writes sent in
order under their own keys, and the event of how a change ended.
"""

from __future__ import annotations

import logging
from datetime import datetime

from domain.errors import Internal, error_info, found
from domain.events.base import Event
from domain.events.subscriptions import (
    PlanChangeApplied,
    PlanChangeSkipped,
    SubscriptionPlanChanged,
)
from domain.ports.provider import BillingProvider
from domain.ports.repositories import UnitOfWork
from domain.subscriptions.change_states import ChangeKind, ChangeState
from domain.subscriptions.period_end import renewal_correction
from domain.subscriptions.renewal_checks import RenewalCheck
from domain.subscriptions.scheduled_changes import ScheduledChange
from domain.subscriptions.subscription import ProviderSubscription, Subscription

logger = logging.getLogger(__name__)


def locked_change(uow: UnitOfWork, change_id: str) -> tuple[ScheduledChange, Subscription]:
    """The change and its subscription, locked in the order every request locks them
    (subscription first), so that PostgreSQL never sees two transactions wait on each other."""
    subscription_id = found(
        uow.scheduled_changes.subscription_of(change_id), "scheduled_change", change_id
    )
    subscription = _existing_subscription(uow, subscription_id)
    change = uow.scheduled_changes.get(change_id, for_update=True)
    assert change is not None  # changes are never deleted
    return change, subscription


def _existing_subscription(uow: UnitOfWork, subscription_id: str) -> Subscription:
    subscription = found(
        uow.subscriptions.get(subscription_id, for_update=True), "subscription", subscription_id
    )
    return subscription


def price_of(uow: UnitOfWork, plan_id: str) -> str:
    plan = uow.plans.get(plan_id)
    if plan is None or plan.provider_price_id is None:
        raise Internal(
            f"plan {plan_id!r} has no price at the provider",
            details=[error_info("PLAN_WITHOUT_PRICE", plan_id=plan_id)],
        )
    return plan.provider_price_id


def correct_renewal(
    provider: BillingProvider,
    change: ScheduledChange,
    subscription: Subscription,
    remote: ProviderSubscription,
    *,
    billed_price_id: str,
    wanted_price_id: str,
    keys: tuple[str, str],
    what: str,
) -> ProviderSubscription:
    """The provider renewed at ``billed_price_id`` before ``what`` (a write about ``change``)
    reached it: send the writes that make the new period cost ``wanted_price_id`` net
    (:func:`domain.subscriptions.period_end.renewal_correction`, under ``keys``: the realignment's
    and the correction's), in order; returns the provider's last answer."""
    logger.warning(
        "%s of change %s of %s reached the provider after it renewed at price %s: "
        "correcting the period from %s",
        what,
        change.id,
        change.subscription_id,
        billed_price_id,
        remote.current_period_start.isoformat(),
    )
    realign_key, correction_key = keys
    writes = renewal_correction(
        remote,
        billed_price_id=billed_price_id,
        wanted_price_id=wanted_price_id,
        realign_key=realign_key,
        correction_key=correction_key,
    )
    for write in writes:
        remote = provider.change_subscription_price(
            subscription.provider_id,
            remote.item_id,
            write.price_id,
            proration_behavior=write.proration_behavior,
            proration_date=write.proration_date,
            idempotency_key=write.idempotency_key,
        )
    return remote


def record_outcome(
    uow: UnitOfWork,
    change: ScheduledChange,
    subscription: Subscription | None,
    command_id: str | None,
    now: datetime,
) -> None:
    """The event of how the change ended: made now (an immediate change), applied at the
    period's end, or skipped. An immediate change's event names the request that asked for it,
    whichever command finished it (a sweep's, when its worker died mid-way and its lease ran
    out; a sync's, when the customer paid): that request's sender waits for it by that id."""
    if change.kind is ChangeKind.IMMEDIATE and change.command_id is not None:
        command_id = change.command_id
    if change.state is ChangeState.APPLIED:
        applied = (
            SubscriptionPlanChanged if change.kind is ChangeKind.IMMEDIATE else PlanChangeApplied
        )
        event: Event = applied.of(change, command_id=command_id, now=now, subscription=subscription)
        if change.kind is ChangeKind.END_OF_PERIOD and not interval_changes(uow, change):
            uow.renewal_checks.add(RenewalCheck.after(change, now))
    else:
        event = PlanChangeSkipped.of(
            change, command_id=command_id, now=now, subscription=subscription
        )
    uow.events.add(event)


def interval_changes(uow: UnitOfWork, change: ScheduledChange) -> bool:
    """Whether the change moves to a plan billed at another interval (month → year): Stripe
    restarts the cycle when it is made and bills it by its own proration, so no renewal at
    the boundary bills it."""
    current, target = uow.plans.get(change.from_plan_id), uow.plans.get(change.target_plan_id)
    return current is not None and target is not None and current.interval != target.interval
