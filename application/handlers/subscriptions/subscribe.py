"""Operator actions on subscriptions (``billing-worker subscriptions``, ``up``'s demo data):
subscribe an account to a plan, seed the period-end burst, report a subscription."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from application.requests.operator_requests import (
    CreateSubscription,
    ReportSubscription,
    SeedPeriodEndChanges,
)
from domain.billing.accounts import BillingAccountState
from domain.errors import (
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    UniquenessViolation,
    error_info,
    found,
    resource_info,
)
from domain.ports.application import HandlerContext
from domain.rules import checked_id, new_id
from domain.subscriptions.plans import Plan
from domain.subscriptions.scheduled_changes import ScheduledChange
from domain.subscriptions.subscription import ProviderSubscription, Subscription, SubscriptionTerms

logger = logging.getLogger(__name__)


def create_subscription(request: CreateSubscription, svc: HandlerContext) -> Subscription:
    """Subscribe a registered billing account to a plan at the provider, then record it.

    The provider call's idempotency key is derived from the subscription id: to retry a
    creation that failed midway, run it again with the same ``subscription_id``. Such a retry
    first looks for the subscription an earlier attempt made at the provider (its metadata
    names our id) and records that one: after the provider forgot the key (a day later) it
    would otherwise make a second one. A new id needs no look: no attempt can have used it.
    """
    org_id, billing_account_id, plan_ref = (
        request.org_id,
        request.billing_account_id,
        request.plan_ref,
    )
    subscription_id, terms = request.subscription_id, request.terms
    checked_id(org_id, "org")
    checked_id(billing_account_id, "billing_account")
    checked_id(plan_ref, "plan")
    retried = subscription_id is not None
    subscription_id = checked_id(subscription_id, "id") if subscription_id else new_id("sub")
    with svc.unit_of_work() as uow:
        if uow.subscriptions.get(subscription_id) is not None:
            raise AlreadyExists(
                f"subscription {subscription_id!r} exists already",
                details=[resource_info("subscription", subscription_id)],
            )
        account = uow.billing_accounts.get(billing_account_id)
        if account is None or account.org_id != org_id:
            raise NotFound.resource("billing_account", billing_account_id)
        account.ensure_customer_exists()
        if account.state is not BillingAccountState.ACTIVE or account.provider_id is None:
            raise FailedPrecondition(
                f"billing account {account.id!r} is not registered with the provider "
                f"(state {account.state.value}); register it first",
                details=[
                    error_info("BILLING_ACCOUNT_NOT_REGISTERED", billing_account_id=account.id)
                ],
            )
        plan = found(uow.plans.find(plan_ref), "plan", plan_ref)
        plan.ensure_available()
        if plan.currency != account.currency:
            raise InvalidArgument.for_fields(
                f"plan {plan.name!r} is billed in {plan.currency}, the account in "
                f"{account.currency}",
                [("plan", "must be billed in the account's currency")],
            )
        assert plan.provider_price_id is not None  # ensure_available
        customer_id = account.provider_id
    provider = svc.billing_provider()
    remote = provider.find_subscription(customer_id, subscription_id) if retried else None
    if remote is not None:
        _ensure_made_for(remote, subscription_id, plan)
        logger.info(
            "subscription %s takes Stripe subscription %s, made by an earlier attempt",
            subscription_id,
            remote.id,
            extra={"subscription_id": subscription_id, "provider_subscription_id": remote.id},
        )
    else:
        remote = provider.create_subscription(
            customer_id,
            plan.provider_price_id,
            terms or SubscriptionTerms(),
            metadata={
                "org_id": org_id,
                "billing_account_id": billing_account_id,
                "subscription_id": subscription_id,
            },
            idempotency_key=Subscription.creation_key(subscription_id),
        )
    subscription = Subscription.started(
        subscription_id, billing_account_id, plan, provider.name, remote, svc.clock.now()
    )
    try:
        with svc.unit_of_work() as uow:
            uow.subscriptions.add(subscription)
            uow.commit()
    except UniquenessViolation:
        # Recorded meanwhile (`stripe drift --adopt` took the same Stripe subscription): the
        # same subscription is done; anything else is a conflict.
        with svc.unit_of_work() as uow:
            recorded = uow.subscriptions.get(subscription_id)
        if recorded is None or recorded.provider_id != remote.id:
            raise
        return recorded
    return subscription


def _ensure_made_for(remote: ProviderSubscription, subscription_id: str, plan: Plan) -> None:
    """The provider's subscription found for ``subscription_id`` bills ``plan``: else it was
    changed at the provider since, and a person decides (``stripe drift`` lists it)."""
    if remote.price_id != plan.provider_price_id:
        raise FailedPrecondition(
            f"Stripe subscription {remote.id} was made for subscription {subscription_id!r} "
            f"and bills price {remote.price_id}, not plan {plan.name!r}'s: see "
            "`billing-worker stripe drift`",
            details=[
                error_info(
                    "PROVIDER_SUBSCRIPTION_EXISTS",
                    subscription_id=subscription_id,
                    provider_subscription_id=remote.id,
                )
            ],
        )


def seed_period_end_changes(request: SeedPeriodEndChanges, svc: HandlerContext) -> Iterator[str]:
    """Subscribe the account ``count`` times to ``plan_ref``, each subscription with a change
    to ``target_plan_ref`` at its period's end: the period-end burst, to try on a local stack
    (``clock advance`` makes them all due together). The request is checked at once; the
    change ids are yielded as the subscriptions are made (in order), so that the caller can
    show its progress."""
    plan_ref, target_plan_ref = request.plan_ref, request.target_plan_ref
    checked_id(plan_ref, "plan")
    checked_id(target_plan_ref, "to")
    with svc.unit_of_work() as uow:
        source, target = uow.plans.find(plan_ref), uow.plans.find(target_plan_ref)
    if source is None or target is None:
        raise NotFound.resource("plan", plan_ref if source is None else target_plan_ref)
    if source.id == target.id:
        raise InvalidArgument.for_fields(
            "the change must lead to another plan", [("to", "is the subscriptions' plan")]
        )

    subscribe = CreateSubscription(
        org_id=request.org_id, billing_account_id=request.billing_account_id, plan_ref=plan_ref
    )

    def seed_one(_: int) -> str:
        subscription = create_subscription(subscribe, svc)
        with svc.unit_of_work() as uow:
            change = ScheduledChange.at_period_end(
                new_id("chg"), subscription, target, now=svc.clock.now()
            )
            uow.scheduled_changes.add(change)
            uow.commit()
        return change.id

    def seeded() -> Iterator[str]:
        with ThreadPoolExecutor(max_workers=request.threads) as pool:
            yield from pool.map(seed_one, range(request.count))

    return seeded()


@dataclass(frozen=True)
class SubscriptionReport:
    """A subscription with its plan and its changes, newest first."""

    subscription: Subscription
    plan: Plan | None
    changes: list[ScheduledChange]

    def to_view(self) -> dict[str, Any]:
        """What ``subscriptions show --json`` prints."""
        return {
            **self.subscription.to_view(),
            "plan": self.plan.to_view() if self.plan else None,
            "current_phase": self.subscription.current_phase().model_dump(mode="json"),
            "changes": [change.to_view() for change in self.changes],
        }


def subscription_report(request: ReportSubscription, svc: HandlerContext) -> SubscriptionReport:
    """The subscription, its plan and its changes (``subscriptions show``)."""
    subscription_id = request.subscription_id
    checked_id(subscription_id, "subscription")
    with svc.unit_of_work() as uow:
        subscription = found(
            uow.subscriptions.get(subscription_id), "subscription", subscription_id
        )
        plan = uow.plans.get(subscription.plan_id)
        changes = uow.scheduled_changes.for_subscription(subscription_id)
    return SubscriptionReport(subscription, plan, changes)
