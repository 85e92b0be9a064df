"""Stripe's truth flowing in: re-read an object from Stripe and bring our rows in line.

One handler serves the Stripe webhook endpoint's commands (one per Stripe event), beat's
reconciliation sweep and operators. It never trusts the event's copy of the object: it reads
the object again, outside any transaction, so that deliveries in any order, twice, or late all
leave our rows equal to what Stripe holds now.

* A subscription: its state, period, item, ``cancel_at`` and the plan of its price follow
  Stripe (except while a change staged ahead of its boundary holds the new price there: its
  plan takes effect here at the boundary). A subscription that ended at Stripe skips its
  pending changes.
* A customer: deleted at Stripe → the account says so (state ``deleted``,
  ``customer_deleted_at``), its subscriptions read ``canceled`` and their pending changes are
  skipped.

What changed is emitted as events (``subscription.synced``,
``billing_account.customer_deleted``) and returned as drift kinds, which the worker counts
(``billing_stripe_drift_total{kind}``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from application.handlers.subscriptions.change_steps import record_outcome
from application.requests.operator_requests import ResyncStripeObject
from domain.billing.accounts import BillingAccount
from domain.errors import GoneAtProvider
from domain.events.billing_accounts import BillingAccountCustomerDeleted
from domain.events.subscriptions import PlanChangeSkipped, SubscriptionSynced
from domain.ports.application import HandlerContext
from domain.ports.repositories import UnitOfWork
from domain.provider.rate_budget import Priority, calls_at
from domain.provider.sync import ObjectType, StripeObjectSynced, SyncSource, SyncStripeObject
from domain.subscriptions.change_states import ChangeReason, ChangeState
from domain.subscriptions.scheduled_changes import ScheduledChange
from domain.subscriptions.subscription import (
    ProviderSubscription,
    Subscription,
    SubscriptionState,
)

logger = logging.getLogger(__name__)

DRIFT_OF_FIELD = {
    "state": "status",
    "current_period_start": "period",
    "current_period_end": "period",
    "plan_id": "plan",
    "cancel_at": "cancel_at",
    "provider_item_id": "item",
    "provider_schedule_id": "schedule",
}
"""The drift kind each followed field counts as."""


def sync_stripe_object(command: SyncStripeObject, svc: HandlerContext) -> StripeObjectSynced:
    """Bring our rows in line with the Stripe object the command names."""
    return resync_stripe_object(
        ResyncStripeObject(
            object_type=command.object_type,
            object_id=command.object_id,
            source=command.source,
            event_id=command.event_id,
            command_id=command.command_id,
        ),
        svc,
    )


def resync_stripe_object(request: ResyncStripeObject, svc: HandlerContext) -> StripeObjectSynced:
    """Bring our rows in line with the Stripe object the request names (the queued command,
    an operator, beat's reconciliation)."""
    if request.object_type == "customer":
        return _read_and_follow_customer(
            request.object_id, svc, source=request.source, command_id=request.command_id
        )
    return _read_and_follow_subscription(
        request.object_id,
        svc,
        source=request.source,
        provider_event_id=request.event_id,
        command_id=request.command_id,
    )


@dataclass(frozen=True)
class ReadsOf:
    """Where our copy of a Stripe object stands: when its last read from Stripe began
    (``None``: never), and since when we keep it (``None``: not ours)."""

    last_read: datetime | None
    kept_since: datetime | None


@dataclass(frozen=True)
class FindReadsOf:
    """Ask where our copy of the Stripe object ``object_id`` stands (the webhook endpoint,
    before it records a sync of it)."""

    object_type: ObjectType
    object_id: str


def reads_of(query: FindReadsOf, svc: HandlerContext) -> ReadsOf:
    """Where our copy of the Stripe object stands (one indexed read)."""
    with svc.unit_of_work() as uow:
        found: BillingAccount | Subscription | None
        if query.object_type == "customer":
            found = uow.billing_accounts.by_provider_id(query.object_id)
        else:
            found = uow.subscriptions.by_provider_id(query.object_id)
    if found is None:
        return ReadsOf(last_read=None, kept_since=None)
    return ReadsOf(last_read=found.synced_at, kept_since=found.created_at)


def _read_and_follow_subscription(
    provider_id: str,
    svc: HandlerContext,
    *,
    source: SyncSource,
    provider_event_id: str | None = None,
    command_id: str | None = None,
) -> StripeObjectSynced:
    with svc.unit_of_work() as uow:
        known = uow.subscriptions.by_provider_id(provider_id)
    if known is None:  # not ours: the drift report's business
        return StripeObjectSynced(object_type="subscription", object_id=provider_id, ours=False)
    read_at = svc.clock.now()  # synced_at: what Stripe held at least from then on is here
    try:
        with calls_at(Priority.BULK):
            remote = svc.billing_provider().get_subscription(provider_id)
    except GoneAtProvider:  # any other refusal fails this read, and is read again later
        logger.warning("subscription %s is gone at the provider", provider_id)
        with svc.unit_of_work() as uow:  # read: the sweep moves on to the others
            gone = uow.subscriptions.by_provider_id(provider_id, for_update=True)
            assert gone is not None
            gone.synced_at = read_at
            uow.subscriptions.save(gone)
            uow.commit()
        return StripeObjectSynced(
            object_type="subscription", object_id=provider_id, ours=True, drift=["missing"]
        )
    return _follow_subscription(
        remote,
        read_at,
        svc,
        source=source,
        provider_event_id=provider_event_id,
        command_id=command_id,
    )


def _follow_subscription(
    remote: ProviderSubscription,
    read_at: datetime,
    svc: HandlerContext,
    *,
    source: SyncSource,
    provider_event_id: str | None = None,
    command_id: str | None = None,
    unless_read_since: bool = False,
) -> StripeObjectSynced:
    """Bring our subscription in line with ``remote``, read from Stripe in a read that
    began at ``read_at``. With ``unless_read_since``, a row read again since (a webhook's
    sync while the sweep's page waited) keeps what that fresher read found."""
    provider_id = remote.id
    with svc.unit_of_work() as uow:
        subscription = uow.subscriptions.by_provider_id(provider_id, for_update=True)
        assert subscription is not None  # subscriptions are never deleted
        if (
            unless_read_since
            and subscription.synced_at is not None
            and subscription.synced_at > read_at
        ):
            return StripeObjectSynced(object_type="subscription", object_id=provider_id, ours=True)
        now = svc.clock.now()
        plan = uow.plans.by_provider_price(remote.price_id)
        pending = uow.scheduled_changes.pending_for(subscription.id, for_update=True)
        if pending is not None and _settle_awaited_payment(
            uow, subscription, pending, remote, now, command_id
        ):
            pending = None
        changes = subscription.follow(
            remote,
            plan.id if plan is not None else None,
            expected_price=_price_in_flight(uow, pending),
            now=now,
        )
        subscription.synced_at = read_at
        drift = sorted({DRIFT_OF_FIELD[name] for name in changes})
        if plan is None:
            drift.append("unknown_price")
        uow.subscriptions.save(subscription)
        if changes:
            uow.events.add(
                SubscriptionSynced.of(
                    subscription,
                    changes,
                    source=source,
                    provider_event_id=provider_event_id,
                    command_id=command_id,
                    now=now,
                )
            )
        if subscription.state.is_over:
            _skip_pending(uow, subscription, ChangeReason.subscription_in(subscription.state), now)
        uow.commit()
    if changes:
        logger.info("subscription %s follows Stripe: %s", subscription.id, sorted(changes))
    return StripeObjectSynced(
        object_type="subscription",
        object_id=provider_id,
        ours=True,
        changes=changes,
        drift=drift,
    )


def _settle_awaited_payment(
    uow: UnitOfWork,
    subscription: Subscription,
    change: ScheduledChange,
    remote: ProviderSubscription,
    now: datetime,
    command_id: str | None,
) -> bool:
    """A change awaiting the customer's payment ends once Stripe holds no pending update:
    applied when the subscription bills its price (the invoice was paid), else skipped
    (``payment_not_completed``: Stripe expired it). Whether it ended."""
    if change.state is not ChangeState.AWAITING_PAYMENT or remote.pending_price_id is not None:
        return False
    target = uow.plans.get(change.target_plan_id)
    if target is not None and remote.price_id == target.provider_price_id:
        subscription.switched(change.target_plan_id, remote, now)
        change.applied(now)
    else:
        change.skip(ChangeReason.PAYMENT_NOT_COMPLETED, now)
    uow.subscriptions.save(subscription)
    uow.scheduled_changes.save(change)
    record_outcome(uow, change, subscription, command_id, now)
    logger.info(
        "change %s of %s %s after awaiting the customer's payment",
        change.id,
        subscription.id,
        change.state.value,
    )
    return True


def _read_and_follow_customer(
    customer_id: str, svc: HandlerContext, *, source: SyncSource, command_id: str | None = None
) -> StripeObjectSynced:
    with svc.unit_of_work() as uow:
        known = uow.billing_accounts.by_provider_id(customer_id)
    if known is None:
        return StripeObjectSynced(object_type="customer", object_id=customer_id, ours=False)
    read_at = svc.clock.now()
    with calls_at(Priority.BULK):
        remote = svc.billing_provider().get_customer(customer_id)
    changes: dict[str, list[Any]] = {}
    with svc.unit_of_work() as uow:
        account = uow.billing_accounts.by_provider_id(customer_id, for_update=True)
        assert account is not None
        now = svc.clock.now()
        account.synced_at = read_at
        state_before = account.state.value
        if remote.deleted and account.customer_deleted(now):
            changes["customer_deleted_at"] = [None, now.isoformat()]
            changes["state"] = [state_before, account.state.value]
            uow.events.add(
                BillingAccountCustomerDeleted.of(account, command_id=command_id, now=now)
            )
            for subscription in uow.subscriptions.of_account(account.id):
                _end_with_the_customer(uow, subscription, source, command_id, now)
        uow.billing_accounts.save(account)
        uow.commit()
    if changes:
        logger.warning("billing account %s: its Stripe customer was deleted", account.id)
    return StripeObjectSynced(
        object_type="customer",
        object_id=customer_id,
        ours=True,
        changes=changes,
        drift=["customer_deleted"] if changes else [],
    )


def _end_with_the_customer(
    uow: UnitOfWork,
    subscription: Subscription,
    source: SyncSource,
    command_id: str | None,
    now: datetime,
) -> None:
    """Stripe cancels a deleted customer's subscriptions: ours read so, and their pending
    changes are skipped."""
    if subscription.state.is_over:
        return
    locked = uow.subscriptions.get(subscription.id, for_update=True)
    assert locked is not None
    changes = {"state": [locked.state.value, SubscriptionState.CANCELED.value]}
    locked.state = SubscriptionState.CANCELED
    locked.updated_at = now
    uow.subscriptions.save(locked)
    uow.events.add(
        SubscriptionSynced.of(
            locked, changes, source=source, provider_event_id=None, command_id=command_id, now=now
        )
    )
    _skip_pending(uow, locked, ChangeReason.CUSTOMER_DELETED, now)


def _skip_pending(
    uow: UnitOfWork, subscription: Subscription, reason: ChangeReason, now: datetime
) -> None:
    """The subscription is over: a change waiting for it will never be made. One being sent
    right now (``applying``) is left to its worker, which finds the subscription over."""
    pending = uow.scheduled_changes.pending_for(subscription.id, for_update=True)
    if pending is None or pending.state is ChangeState.APPLYING:
        return
    pending.skip(reason, now)
    uow.scheduled_changes.save(pending)
    uow.events.add(
        PlanChangeSkipped.of(pending, command_id=None, now=now, subscription=subscription)
    )


def _price_in_flight(uow: UnitOfWork, pending: ScheduledChange | None) -> str | None:
    """The price a change being made or staged holds at Stripe ahead of taking effect here:
    the sync leaves the plan to that change."""
    if pending is None or pending.state not in (ChangeState.APPLYING, ChangeState.STAGED):
        return None
    plan = uow.plans.get(pending.target_plan_id)
    return plan.provider_price_id if plan is not None else None
