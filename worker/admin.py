"""Operator actions behind the CLI's admin commands (and the demo data of ``up``)."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from domain.billing import BillingAccountState
from domain.errors import (
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    UniquenessViolation,
    error_info,
    resource_info,
)
from domain.organizations import Organization, OrganizationState, validate_avatar
from domain.plans import Plan, PlanSpec
from domain.ports import BillingProvider, Clock, HandlerContext, UnitOfWork
from domain.scheduled_changes import ScheduledChange
from domain.subscriptions import Subscription, SubscriptionTerms
from domain.users import UserState
from worker.bootstrap import BillingSettings
from worker.db.models import OrganizationRow, UserRow


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(8)}"


def create_organization(
    sessions: sessionmaker[Session],
    clock: Clock,
    *,
    name: str,
    title: str = "",
    org_id: str | None = None,
    metadata: dict[str, Any] | None = None,
    avatar: str | None = None,
    disabled: bool = False,
) -> Organization:
    now = clock.now()
    organization = Organization(
        id=org_id or new_id("org"),
        name=name,
        title=title or name,
        state=OrganizationState.DISABLED if disabled else OrganizationState.ENABLED,
        created_at=now,
        updated_at=now,
        metadata=metadata or {},
        avatar=validate_avatar(avatar) if avatar else None,
    )
    with sessions.begin() as session:
        session.add(
            OrganizationRow(
                id=organization.id,
                name=organization.name,
                title=organization.title,
                metadata_=organization.metadata,
                state=organization.state.value,
                avatar=organization.avatar,
                created_at=now,
                updated_at=now,
            )
        )
    return organization


def create_user(
    sessions: sessionmaker[Session],
    clock: Clock,
    *,
    email: str,
    name: str = "",
    user_id: str | None = None,
    disabled: bool = False,
) -> dict[str, Any]:
    now = clock.now()
    row = UserRow(
        id=user_id or new_id("usr"),
        email=email,
        name=name,
        state=(UserState.DISABLED if disabled else UserState.ENABLED).value,
        created_at=now,
        updated_at=now,
    )
    with sessions.begin() as session:
        session.add(row)
    return {"id": row.id, "email": row.email, "name": row.name, "state": row.state}


def user_state(sessions: sessionmaker[Session], user_id: str) -> str | None:
    with sessions() as session:
        row = session.get(UserRow, user_id)
        return row.state if row else None


# --- plans and subscriptions ------------------------------------------------------------------


@dataclass
class OperatorContext:
    """What admin commands (and ``up``'s demo data) work with: a database, a clock and the
    provider, the same adapters the workers use (a :class:`domain.ports.HandlerContext`)."""

    sessions: sessionmaker[Session]
    clock: Clock
    provider_factory: Callable[[], BillingProvider]
    billing: BillingSettings

    def unit_of_work(self) -> UnitOfWork:
        from worker.db.uow import SqlUnitOfWork

        return SqlUnitOfWork(self.sessions)

    def billing_provider(self) -> BillingProvider:
        return self.provider_factory()


def create_plan(ctx: HandlerContext, spec: PlanSpec, *, plan_id: str | None = None) -> Plan:
    """Create a plan with its product and price at the provider.

    The plan is saved first, then registered with the idempotency key of its id: running the
    same command again after a failure resumes the plan (same name and terms) instead of
    making a second product.
    """
    with ctx.unit_of_work() as uow:
        plan = uow.plans.by_name(spec.name)
        if plan is not None and (plan.is_registered or not plan.matches(spec)):
            raise AlreadyExists(
                f"a plan named {spec.name!r} exists already ({plan.id})",
                details=[resource_info("plan", plan.id)],
            )
        if plan is None:
            plan = Plan.new(plan_id or new_id("plan"), spec, ctx.clock.now())
            uow.plans.add(plan)
            try:
                uow.commit()
            except UniquenessViolation:
                raise AlreadyExists(f"a plan {plan.id!r} or {spec.name!r} exists already") from None
    provider = ctx.billing_provider()
    price = provider.create_plan_price(plan.provider_plan(), idempotency_key=plan.registration_key)
    with ctx.unit_of_work() as uow:
        plan.registered(provider.name, price, ctx.clock.now())
        uow.plans.save(plan)
        uow.commit()
    return plan


def list_plans(ctx: HandlerContext) -> list[Plan]:
    with ctx.unit_of_work() as uow:
        return uow.plans.list()


def create_subscription(
    ctx: HandlerContext,
    *,
    org_id: str,
    billing_account_id: str,
    plan_ref: str,
    terms: SubscriptionTerms | None = None,
    subscription_id: str | None = None,
) -> Subscription:
    """Subscribe a registered billing account to a plan at the provider, then record it.

    The provider call's idempotency key is derived from the subscription id: to retry a
    creation that failed midway, run it again with the same ``subscription_id``.
    """
    subscription_id = subscription_id or new_id("sub")
    with ctx.unit_of_work() as uow:
        if uow.subscriptions.get(subscription_id) is not None:
            raise AlreadyExists(
                f"subscription {subscription_id!r} exists already",
                details=[resource_info("subscription", subscription_id)],
            )
        account = uow.billing_accounts.get(billing_account_id)
        if account is None or account.org_id != org_id:
            raise NotFound.resource("billing_account", billing_account_id)
        if account.state is not BillingAccountState.ACTIVE or account.provider_id is None:
            raise FailedPrecondition(
                f"billing account {account.id!r} is not registered with the provider "
                f"(state {account.state.value}); register it first",
                details=[
                    error_info("BILLING_ACCOUNT_NOT_REGISTERED", billing_account_id=account.id)
                ],
            )
        plan = uow.plans.find(plan_ref)
        if plan is None:
            raise NotFound.resource("plan", plan_ref)
        plan.ensure_available()
        if plan.currency != account.currency:
            raise InvalidArgument.for_fields(
                f"plan {plan.name!r} is billed in {plan.currency}, the account in "
                f"{account.currency}",
                [("plan", "must be billed in the account's currency")],
            )
        assert plan.provider_price_id is not None  # ensure_available
        customer_id = account.provider_id
    provider = ctx.billing_provider()
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
    with ctx.unit_of_work() as uow:
        subscription = Subscription.started(
            subscription_id, billing_account_id, plan, provider.name, remote, ctx.clock.now()
        )
        uow.subscriptions.add(subscription)
        uow.commit()
    return subscription


def seed_period_end_changes(
    ctx: HandlerContext,
    *,
    org_id: str,
    billing_account_id: str,
    plan_ref: str,
    target_plan_ref: str,
    count: int,
    threads: int = 4,
    progress: Callable[[int], None] = lambda done: None,
) -> list[str]:
    """Subscribe the account ``count`` times to ``plan_ref``, each subscription with a change
    to ``target_plan_ref`` at its period's end: the period-end burst, to try on a local stack
    (``clock advance`` makes them all due together). Returns the change ids."""
    from concurrent.futures import ThreadPoolExecutor

    with ctx.unit_of_work() as uow:
        source, target = uow.plans.find(plan_ref), uow.plans.find(target_plan_ref)
    if source is None or target is None:
        raise NotFound.resource("plan", plan_ref if source is None else target_plan_ref)
    if source.id == target.id:
        raise InvalidArgument.for_fields(
            "the change must lead to another plan", [("to", "is the subscriptions' plan")]
        )

    def seed_one(_: int) -> str:
        subscription = create_subscription(
            ctx, org_id=org_id, billing_account_id=billing_account_id, plan_ref=plan_ref
        )
        with ctx.unit_of_work() as uow:
            change = ScheduledChange.at_period_end(
                new_id("chg"), subscription, target, now=ctx.clock.now()
            )
            uow.scheduled_changes.add(change)
            uow.commit()
        return change.id

    change_ids: list[str] = []
    with ThreadPoolExecutor(max_workers=threads) as pool:
        for change_id in pool.map(seed_one, range(count)):
            change_ids.append(change_id)
            progress(len(change_ids))
    return change_ids


def subscription_report(ctx: HandlerContext, subscription_id: str) -> dict[str, Any]:
    """A subscription with its plan and its changes, newest first (``subscriptions show``)."""
    with ctx.unit_of_work() as uow:
        subscription = uow.subscriptions.get(subscription_id)
        if subscription is None:
            raise NotFound.resource("subscription", subscription_id)
        plan = uow.plans.get(subscription.plan_id)
        changes = uow.scheduled_changes.for_subscription(subscription_id)
    return {
        **subscription.to_view(),
        "plan": plan.to_view() if plan else None,
        "current_phase": subscription.current_phase().model_dump(mode="json"),
        "changes": [change.to_view() for change in changes],
    }
